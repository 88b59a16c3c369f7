"""The package map and import rule of docs/development.md, checked against the tree.

The document is the source: its "Package map" table says which first-party packages each package
may import, and its "Layers" lists put every module of a package in one layer (pure logic,
adapters, services, CLIs). This test fails when the tree and the document disagree (a package or
module missing from either) or when an import breaks the rule:

- a package imports only itself and the packages its row names; nothing imports `bench` or
  `tests` (bench may import anything but tests), so only harnesses reach the launcher;
- inside the layered packages a module imports only modules of its own layer or a lower one,
  also across packages (a pure module of one package never reaches another package's adapter);
- a pure module imports no network, process or thread library;
- inside `api/`, a room (a sub-package, or the shell of top-level modules) imports only itself,
  the rooms its row of the "Rooms of `api/`" table names and the shell's shared top modules;
  and no module of `api/` takes part in an import cycle.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "development.md"
HARNESSES = ("bench", "tests")
LAYERS = ("pure", "adapters", "services", "cli")
# What pure logic must not touch: sockets, processes, threads, event loops, servers and clients.
IO_LIBRARIES = frozenset(
    {
        "asyncio",
        "concurrent",
        "confluent_kafka",
        "gmqtt",
        "http",
        "multiprocessing",
        "paho",
        "prometheus_client",
        "select",
        "selectors",
        "signal",
        "socket",
        "socketserver",
        "ssl",
        "subprocess",
        "threading",
        "urllib",
    }
)
PURE_SUBMODULE = "urllib.parse"
ROOMS_PACKAGE = "api"
ROOMS_TITLE = "Rooms of `api/`"
SHARED_TOP_LINE = re.compile(
    r"^Every room may also import these top modules of the shell: (.*)$", re.M
)


@dataclass(frozen=True)
class PackageRow:
    name: str
    may_import: frozenset[str]


def _doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/development.md has no '## {title}' section"
    return match.group(1)


def parse_package_map(text: str) -> dict[str, PackageRow]:
    """Rows of the table: | `pkg/` | what it owns | `a`, `b` or '-' |."""
    rows: dict[str, PackageRow] = {}
    for line in _section(text, "Package map").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`").rstrip("/")
        allowed = frozenset(re.findall(r"`([a-z_]+)`", cells[-1]))
        rows[name] = PackageRow(name, allowed)
    return rows


def parse_layers(text: str) -> dict[str, dict[str, str]]:
    """`### pkg` then lines `- pure: `a`, `b.c``; returns {package: {module: layer}}."""
    result: dict[str, dict[str, str]] = {}
    package = ""
    for line in _section(text, "Layers").splitlines():
        heading = re.match(r"^### `?([a-z_]+)/?`?\s*$", line)
        if heading:
            package = heading.group(1)
            result[package] = {}
            continue
        entry = re.match(r"^- (\w+):(.*)$", line)
        if entry and package and entry.group(1) in LAYERS:
            for module in re.findall(r"`([a-z_.]+)`", entry.group(2)):
                full = f"{package}.{module}"
                assert full not in result[package], f"{full} is listed twice"
                result[package][full] = entry.group(1)
    return result


def first_party_packages() -> set[str]:
    return {
        p.parent.name
        for p in ROOT.glob("*/__init__.py")
        if not p.parent.name.startswith(".") and p.parent.name != "kafka"
    }


def modules_of(package: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


@functools.cache
def _import_statements(text: str, filename: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every absolute import of a module's source: ``("", names)`` for ``import a, b`` and
    ``(module, names)`` for ``from module import names``. Cached by the source itself, so
    the tests of one worker parse each file once, and a planted violation is still seen."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(text, filename=filename)):
        if isinstance(node, ast.Import):
            found.append(("", tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, tuple(alias.name for alias in node.names)))
    return tuple(found)


def _imports_of(path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return _import_statements(path.read_text(encoding="utf-8"), str(path))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """First-party modules a file imports (lazy and TYPE_CHECKING imports included)."""
    targets: set[str] = set()

    def resolve(dotted: str) -> str:
        parts = dotted.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        return ".".join(parts) if parts else dotted

    for module, names in _imports_of(path):
        if module:
            targets.update(resolve(f"{module}.{name}") for name in names)
        else:
            targets.update(resolve(name) for name in names)
    ours = first_party_packages()  # once: it globs the tree
    return {t for t in targets if t.split(".")[0] in ours}


def third_party_roots(path: Path) -> set[str]:
    roots: set[str] = set()

    def root(name: str) -> str:
        # urllib.parse only splits and quotes strings; urllib.request is the client
        return PURE_SUBMODULE if name.startswith(PURE_SUBMODULE) else name.partition(".")[0]

    for module, names in _imports_of(path):
        if module:
            roots.add(root(module))
        else:
            roots.update(root(name) for name in names)
    return roots


def all_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in first_party_packages():
        found.update(modules_of(package))
    return found


def layer_of(module: str, layers: dict[str, dict[str, str]]) -> str | None:
    """A package's __init__ counts as pure (it holds the version and docstring)."""
    package = module.split(".", maxsplit=1)[0]
    if module == package or module.endswith(".__main__"):
        return "pure" if module == package else "cli"
    return layers.get(package, {}).get(module)


# --- the document matches the tree -----------------------------------------------------------


def test_every_package_is_on_the_map_and_every_row_exists() -> None:
    rows = parse_package_map(_doc_text())
    assert set(rows) == first_party_packages()


def test_every_module_of_a_layered_package_has_one_layer() -> None:
    text = _doc_text()
    layers = parse_layers(text)
    layered = set(parse_package_map(text)) - set(HARNESSES)
    assert set(layers) == layered, "every package but the harnesses has a '### pkg' layer list"
    for package in layered:
        on_disk = {
            m
            for m in modules_of(package)
            if m != package and not m.endswith(".__main__") and not _is_subpackage(m)
        }
        assert set(layers[package]) == on_disk, (
            f"{package}: in docs only {sorted(set(layers[package]) - on_disk)}, "
            f"on disk only {sorted(on_disk - set(layers[package]))}"
        )


def _is_subpackage(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


# --- the rule ----------------------------------------------------------------------------------


def package_violations() -> list[str]:
    rows = parse_package_map(_doc_text())
    known = set(all_modules())
    problems = []
    for module, path in sorted(all_modules().items()):
        package = module.split(".")[0]
        row = rows.get(package)
        if row is None:
            continue
        for target in sorted(imported_modules(path, known)):
            target_package = target.split(".")[0]
            if target_package == package:
                continue
            if target_package == "tests" or (target_package == "bench" and package != "tests"):
                problems.append(f"{module} imports harness {target}")
            elif package not in HARNESSES and target_package not in row.may_import:
                problems.append(f"{module} imports {target} ({package} may not use it)")
    return problems


def layer_violations() -> list[str]:
    text = _doc_text()
    layers = parse_layers(text)
    known = set(all_modules())
    problems = []
    for module, path in sorted(all_modules().items()):
        if module.split(".")[0] in HARNESSES:
            continue
        own = layer_of(module, layers)
        if own is None and _is_subpackage(module):
            own = "pure"  # a subpackage's __init__, like a package's
        if own is None:
            continue  # not on the page: test_every_module_of_a_layered_package_has_one_layer
        rank = LAYERS.index(own)
        for target in sorted(imported_modules(path, known)):
            if target.split(".")[0] in HARNESSES:
                continue
            theirs = layer_of(target, layers)
            if theirs is None and _is_subpackage(target):
                theirs = "pure"  # a subpackage's __init__
            if theirs is not None and LAYERS.index(theirs) > rank:
                problems.append(f"{module} ({own}) imports {target} ({theirs})")
        if own == "pure":
            bad = sorted(third_party_roots(path) & IO_LIBRARIES)
            if bad:
                problems.append(f"{module} (pure) imports I/O libraries {bad}")
    return problems


def test_packages_import_only_what_the_map_allows() -> None:
    assert package_violations() == []


def test_modules_import_only_their_own_layer_or_lower() -> None:
    assert layer_violations() == []


# --- the rooms of api/ -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rooms:
    may_import: dict[str, frozenset[str]]  # room -> the other rooms it may import
    shared_top: frozenset[str]  # top modules of the shell every room may import


def parse_rooms(text: str) -> Rooms:
    """Rows | `room` | what it owns | `a`, `b` (why) or '-' | and the shared-top sentence."""
    section = _section(text, ROOMS_TITLE)
    cells_of = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
    ]
    rows = [c for c in cells_of if len(c) >= 3 and c[0].startswith("`")]
    names = {c[0].strip("`") for c in rows}
    may_import: dict[str, frozenset[str]] = {}
    for cells in rows:
        named = set(re.findall(r"`([a-z_]+)`", cells[-1]))
        assert named <= names, f"room {cells[0]} names unknown rooms {sorted(named - names)}"
        may_import[cells[0].strip("`")] = frozenset(named)
    shared = SHARED_TOP_LINE.search(section)
    assert shared, f"'{ROOMS_TITLE}' has no 'Every room may also import ...' sentence"
    return Rooms(may_import, frozenset(re.findall(r"`([a-z_.]+)`", shared.group(1))))


def room_of(module: str, root: Path = ROOT) -> str:
    """`api.mr.consumers` -> `mr`; a top-level module (or `api` itself) -> the shell, `api`."""
    parts = module.split(".")
    if len(parts) >= 2 and (root / parts[0] / parts[1] / "__init__.py").exists():
        return parts[1]
    return parts[0]


def room_violations(rooms: Rooms, imports: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """``imports``: each module of the rooms' package -> the first-party modules it imports."""
    problems = []
    for module, targets in sorted(imports.items()):
        own = room_of(module, root)
        for target in sorted(targets):
            if target.split(".")[0] != module.split(".")[0] or target in rooms.shared_top:
                continue
            theirs = room_of(target, root)
            if theirs != own and theirs not in rooms.may_import.get(own, frozenset()):
                problems.append(f"{module} (room {own}) imports {target} (room {theirs})")
    return problems


def import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Cycles among the modules of ``imports`` (each found once, from its first module)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(imports.get(module, set())):
            if target == module or target not in imports:
                continue
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(imports):
        if module not in state:
            visit(module)
    return cycles


def rooms_imports() -> dict[str, set[str]]:
    """Each module of `api/` (its package `__init__` left out: the version) -> what it imports."""
    known = set(all_modules())
    return {
        module: imported_modules(path, known) - {ROOMS_PACKAGE}
        for module, path in modules_of(ROOMS_PACKAGE).items()
        if module != ROOMS_PACKAGE and not module.endswith(".__main__")
    }


def test_every_room_of_api_is_in_the_table_and_every_row_exists() -> None:
    rooms = parse_rooms(_doc_text())
    on_disk = {p.parent.name for p in (ROOT / ROOMS_PACKAGE).glob("*/__init__.py")}
    assert set(rooms.may_import) == on_disk | {ROOMS_PACKAGE}
    for top in rooms.shared_top:
        assert top in modules_of(ROOMS_PACKAGE), f"{top} is not a module of {ROOMS_PACKAGE}"
        assert room_of(top) == ROOMS_PACKAGE, f"{top} is not a top module of the shell"


def test_rooms_import_only_the_rooms_their_row_names() -> None:
    assert room_violations(parse_rooms(_doc_text()), rooms_imports()) == []


def test_api_has_no_import_cycles() -> None:
    assert import_cycles(rooms_imports()) == []


# --- the checker itself catches what it should ---------------------------------------------


def test_the_checker_sees_a_forbidden_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pure module that imports the launcher and a socket is reported twice."""
    rows = parse_package_map(_doc_text())
    layered = sorted(set(rows) - set(HARNESSES) - {"stack"})
    package = layered[0]
    pure = sorted(m for m, layer in parse_layers(_doc_text())[package].items() if layer == "pure")
    target = ROOT / (pure[0].replace(".", "/") + ".py")
    original = target.read_text(encoding="utf-8")
    bad = original + "\n\ndef _probe() -> None:\n    import socket\n\n    import stack.cli\n"
    real_read = Path.read_text

    def patched(self: Path, *args: object, **kwargs: object) -> str:
        if self == target:
            return bad
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", patched)
    assert any(f"{pure[0]} imports stack.cli" in p for p in package_violations())
    layer_problems = layer_violations()
    assert any(p.startswith(f"{pure[0]} (pure) imports stack.cli") for p in layer_problems)
    assert any(p.startswith(f"{pure[0]} (pure) imports I/O") for p in layer_problems)


def test_parsers_read_the_documented_shapes() -> None:
    text = (
        "## Package map\n| package | owns | may import |\n|---|---|---|\n"
        "| `a/` | x | - |\n| `b/` | y | `a` |\n\n"
        "## Layers\n### a\n- pure: `m`, `sub.n`\n- cli: `cli`\n### `b/`\n- services: `s`\n"
    )
    rows = parse_package_map(text)
    assert rows["a"].may_import == frozenset()
    assert rows["b"].may_import == frozenset({"a"})
    assert parse_layers(text) == {
        "a": {"a.m": "pure", "a.sub.n": "pure", "a.cli": "cli"},
        "b": {"b.s": "services"},
    }


def test_the_room_checker_sees_a_door_reaching_into_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plumbing module that imports the console, and a room the table lets import nothing
    but plumbing reaching into the shell's service: both reported; the shared top is not."""
    rooms = parse_rooms(_doc_text())
    assert rooms.may_import["plumbing"] == frozenset()
    target = ROOT / "api" / "plumbing" / "limits.py"
    original = target.read_text(encoding="utf-8")
    bad = original + (
        "\n\ndef _probe() -> None:\n    import api.console.app\n    import api.errors\n"
        "    import api.plumbing.framing\n"
    )
    real_read = Path.read_text

    def patched(self: Path, *args: object, **kwargs: object) -> str:
        if self == target:
            return bad
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", patched)
    problems = room_violations(rooms, rooms_imports())
    assert problems == [
        "api.plumbing.limits (room plumbing) imports api.console.app (room console)"
    ]
    planted = {"api.mr.apikeys": {"api.service", "api.config", "api.plumbing.auth"}}
    assert room_violations(rooms, planted) == [
        "api.mr.apikeys (room mr) imports api.service (room api)"
    ]


def test_the_room_checker_reads_a_fake_tree(tmp_path: Path) -> None:
    """Pure functions on a planted tree: rooms found by their `__init__`, the rule applied."""
    for room in ("door", "shared"):
        (tmp_path / "pkg" / room).mkdir(parents=True)
        (tmp_path / "pkg" / room / "__init__.py").write_text("")
    text = (
        "## Rooms of `api/`\nEvery room may also import these top modules of the shell: "
        "`pkg.config`.\n\n| room | owns | may import |\n|---|---|---|\n"
        "| `pkg` | shell | `door`, `shared` |\n| `door` | a door | `shared` (its client) |\n"
        "| `shared` | plumbing | - |\n"
    )
    rooms = parse_rooms(text)
    assert rooms.may_import == {
        "pkg": frozenset({"door", "shared"}),
        "door": frozenset({"shared"}),
        "shared": frozenset(),
    }
    assert rooms.shared_top == frozenset({"pkg.config"})
    assert room_of("pkg.door.app", tmp_path) == "door"
    assert room_of("pkg.service", tmp_path) == "pkg"
    imports = {
        "pkg.service": {"pkg.door.app"},
        "pkg.door.app": {"pkg.shared.kafka", "pkg.config"},
        "pkg.shared.kafka": {"pkg.door.app", "pkg.config"},  # the violation and a cycle
    }
    assert [p.split(" imports ")[1] for p in room_violations(rooms, imports, tmp_path)] == [
        "pkg.door.app (room door)"
    ]
    assert import_cycles(imports) == [["pkg.door.app", "pkg.shared.kafka", "pkg.door.app"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
