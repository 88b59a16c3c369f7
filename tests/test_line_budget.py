"""No product or bench module over 400 lines (issue 31).

A module that grows past the budget is split by concern, not cut at line 400: this test fails on
any `.py` file of the product packages or of `bench/` with more lines than `LIMIT`. There are no
exceptions; `KNOWN_EXCEPTIONS` stays empty so the rule holds by itself.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 400
PRODUCT_PACKAGES = (
    "appconfig",
    "health",
    "mqtt_codec",
    "bridge",
    "commands",
    "device_sim",
    "registry",
    "api",
    "spark_jobs",
    "stack",
    "edge",
    "amqp",
)
CHECKED = (*PRODUCT_PACKAGES, "bench")
# Paths (relative to the root) allowed past the limit. Empty: split the module instead.
KNOWN_EXCEPTIONS: frozenset[str] = frozenset()


def line_count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def modules_over_budget(
    root: Path,
    packages: tuple[str, ...] = CHECKED,
    limit: int = LIMIT,
    exceptions: frozenset[str] = KNOWN_EXCEPTIONS,
) -> list[str]:
    """`path: N lines` for every .py file under `packages` (those that exist) past `limit`."""
    over = []
    for package in packages:
        folder = root / package
        if not folder.is_dir():
            continue  # e.g. `commands/` before the command path moves out of bridge/
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            count = line_count(path)
            if count > limit and rel not in exceptions:
                over.append(f"{rel}: {count} lines")
    return over


def test_no_module_is_over_the_line_budget() -> None:
    over = modules_over_budget(ROOT)
    assert over == [], f"split these by concern (limit {LIMIT} lines): {over}"


def test_the_known_exceptions_exist_and_are_really_over() -> None:
    """An exception that is gone or back under the limit is dropped from the list."""
    for rel in KNOWN_EXCEPTIONS:
        path = ROOT / rel
        assert path.is_file(), f"{rel} is listed as an exception but does not exist"
        assert line_count(path) > LIMIT, f"{rel} is within the budget now: drop the exception"


def test_the_check_sees_a_module_over_the_budget(tmp_path: Path) -> None:
    """A planted file one line past the limit is reported; one at the limit is not."""
    package = tmp_path / "bridge"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""x."""\n', encoding="utf-8")
    (package / "at_limit.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    (package / "sub" / "too_long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "long_bench.py").write_text("y = 2\n" * 500, encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "ignored.py").write_text("z = 3\n" * 999, encoding="utf-8")

    assert modules_over_budget(tmp_path) == [
        f"bridge/sub/too_long.py: {LIMIT + 1} lines",
        "bench/long_bench.py: 500 lines",
    ]
    # a listed exception is let through, the other violation still fails
    assert modules_over_budget(tmp_path, exceptions=frozenset({"bench/long_bench.py"})) == [
        f"bridge/sub/too_long.py: {LIMIT + 1} lines"
    ]


def test_the_check_counts_a_last_line_without_newline(tmp_path: Path) -> None:
    (tmp_path / "edge").mkdir()
    (tmp_path / "edge" / "m.py").write_text("x = 1\n" * LIMIT + "y = 2", encoding="utf-8")
    assert modules_over_budget(tmp_path) == [f"edge/m.py: {LIMIT + 1} lines"]
