"""The commands README.md and docs/*.md show, and whether this project's programs accept them.

Where commands are found:
- ``fenced``: every line of a ```bash / ```sh / ```shell / ```console block (``\\``-continued
  lines joined, ``# comments`` dropped), and the ``$ ``-prompted lines of other blocks (a
  transcript); other lines of untagged blocks are diagrams or output;
- ``synopsis``: a usage line (a console script followed by ``[--option ...]``, ``A|B`` or
  ``...``) in an untagged block or an inline code span;
- ``inline``: an inline code span that is a whole command line of ours with at least one
  ``--option``, or a ``make`` line (a span naming a program or a subcommand alone is a
  reference, not an example).

A leading ``.venv/bin/`` (or any folder) of a program is dropped: ``.venv/bin/iot-sim`` is
``iot-sim``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import runpy
import shlex
import sys
import tomllib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console"})
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_SYNOPSIS_MARK = re.compile(r"[\[\]|]|\.\.\.")
_INLINE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")


@dataclass(frozen=True)
class Example:
    doc: str  # path relative to the repository
    line: int
    argv: tuple[str, ...]
    kind: str  # "fenced", "synopsis" or "inline"

    @property
    def command(self) -> str:
        return " ".join(a if a == "|" else shlex.quote(a) for a in self.argv)

    @property
    def program(self) -> str:
        return self.argv[0]

    @property
    def ours(self) -> bool:
        """A console script of this project, ``python -m <module>`` or ``make``."""
        return self.program in SCRIPTS or self.program == "make" or self.python_module is not None

    @property
    def python_module(self) -> str | None:
        if self.program.startswith("python") and len(self.argv) > 2 and self.argv[1] == "-m":
            return self.argv[2]
        return None

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.command}"


def _program(word: str) -> str:
    name = word.rsplit("/", 1)[-1]
    return name if name in SCRIPTS or re.fullmatch(r"python3?", name) else word


def _argv(text: str, *, comments: bool = True) -> tuple[str, ...]:
    """The words of a command line; a pipe is a word of its own (``curl ... | grep x``)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    if not comments:
        lexer.commenters = ""
    words = list(lexer)
    if words:
        words[0] = _program(words[0])
    return tuple(words)


def _is_synopsis(text: str) -> bool:
    return bool(_SYNOPSIS_MARK.search(text.split("#", 1)[0]))


def examples(path: Path) -> list[Example]:
    """Every command shown in one Markdown file, in order."""
    rel = path.relative_to(ROOT).as_posix()
    found: list[Example] = []
    prose: list[str] = []  # the text outside code blocks, with its line numbers kept
    lang: str | None = None  # inside a block: its info string ("" when untagged)
    pending, start = "", 0
    for no, line in enumerate(path.read_text().splitlines(), 1):
        fence = _FENCE.match(line)
        if fence:
            lang = fence.group(2).lower() if lang is None else None
            prose.append("")
            continue
        if lang is None:
            prose.append(line)
            continue
        prose.append("")
        if lang in SHELL_LANGS:
            text = line
        elif line.startswith("$ "):
            text = line[2:]
        elif lang == "" and _program(line.split(" ", 1)[0]) in SCRIPTS and _is_synopsis(line):
            found.append(Example(rel, no, _argv(line), "synopsis"))
            continue
        else:
            continue
        if not pending:
            start = no
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        argv = _argv(pending + text)
        pending = ""
        if argv:
            found.append(Example(rel, start, argv, "fenced"))
    text = "\n".join(prose)
    for m in _INLINE.finditer(text):
        span = " ".join(m.group(1).split())
        no = text.count("\n", 0, m.start()) + 1
        try:
            argv = _argv(span, comments=False)
        except ValueError:
            continue
        example = Example(rel, no, argv, "inline")
        if not argv or not example.ours:
            continue
        if _is_synopsis(span):
            if argv[0] in SCRIPTS:
                found.append(Example(rel, no, argv, "synopsis"))
        elif argv[0] == "make" or any(a.startswith("--") for a in argv):
            found.append(example)
    return sorted(found, key=lambda e: e.line)


def all_examples() -> list[Example]:
    return [e for doc in DOCS for e in examples(doc)]


# --- does a program accept a command line? ------------------------------------------------------


class _Parsed(BaseException):
    """Raised as soon as the program's argparse accepted the arguments: nothing else runs."""

    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__()
        self.namespace = namespace


@dataclass(frozen=True)
class ParseResult:
    namespace: argparse.Namespace | None  # None: rejected, never parsed, or --help
    code: object  # exit code / SystemExit code when rejected
    output: str  # what the program wrote (its usage error)

    @property
    def accepted(self) -> bool:
        return self.namespace is not None or (self.code in (0, None) and "usage:" in self.output)


@contextlib.contextmanager
def _stop_after_parsing() -> Iterator[None]:
    original = argparse.ArgumentParser.parse_args

    def parse_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Parsed(original(self, *args, **kwargs))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_args):
        yield


def parse(argv: Sequence[str]) -> ParseResult:
    """Hand ``argv`` to the real entry point (console script or ``python -m``) and stop right
    after its ``ArgumentParser.parse_args`` returned; a usage error comes back as exit 2."""
    out = io.StringIO()
    saved = sys.argv
    try:
        with (
            _stop_after_parsing(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: module already imported
            code = _invoke(list(argv))
    except _Parsed as parsed:
        return ParseResult(parsed.namespace, 0, out.getvalue())
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
    output = out.getvalue()
    if code in (0, None) and "--help" not in argv:
        output += "(the program returned without parsing its arguments with argparse)"
    return ParseResult(None, code, output)


def entry_point(script: str) -> Any:
    """The function a console script runs, as pyproject.toml names it."""
    module, func = SCRIPTS[script].split(":")
    return getattr(importlib.import_module(module), func)


def _invoke(argv: list[str]) -> object:
    program, *args = argv
    if program in SCRIPTS:
        return entry_point(program)(args)
    if re.fullmatch(r"python3?", program) and args[:1] == ["-m"] and len(args) > 1:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return None
    raise ValueError(f"not a program of this project: {program}")


def help_text(argv: Sequence[str]) -> str:
    """``<argv> --help`` of a console script, run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = _invoke([*argv, "--help"])
        except SystemExit as exc:
            code = exc.code
    assert code in (0, None), f"{shlex.join(argv)} --help exited {code}:\n{out.getvalue()}"
    return out.getvalue()


# --- make ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Makefile:
    variables: dict[str, str]
    targets: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # prerequisites, recipe

    @classmethod
    def read(cls, path: Path = ROOT / "Makefile") -> Makefile:
        variables: dict[str, str] = {}
        targets: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        current: str | None = None
        for line in path.read_text().splitlines():
            if line.startswith("\t") and current is not None:
                prereqs, recipe = targets[current]
                targets[current] = (prereqs, (*recipe, line.strip()))
                continue
            assign = re.match(r"^([A-Z_]+)\s*[?:]?=\s*(.*)$", line)
            rule = re.match(r"^([\w.-]+)\s*:(?!=)\s*(.*)$", line)
            if assign:
                variables[assign.group(1)] = assign.group(2).strip()
                current = None
            elif rule and rule.group(1) != ".PHONY":
                current = rule.group(1)
                targets[current] = (tuple(rule.group(2).split()), ())
            else:
                current = None
        return cls(variables, targets)

    def commands(self, args: Sequence[str]) -> list[tuple[str, ...]]:
        """The recipe lines ``make <args>`` runs (prerequisites first), variables expanded."""
        values = dict(self.variables)
        goals: list[str] = []
        for arg in args:
            if "=" in arg:
                name, value = arg.split("=", 1)
                assert name in self.variables, f"make: the Makefile has no variable {name}"
                values[name] = value
            else:
                goals.append(arg)
        done: list[str] = []

        def visit(target: str) -> None:
            assert target in self.targets, f"make: no target {target!r}"
            if target in done:
                return
            for prereq in self.targets[target][0]:
                visit(prereq)
            done.append(target)

        for goal in goals or [next(iter(self.targets))]:
            visit(goal)
        lines = [line for target in done for line in self.targets[target][1]]
        return [_argv(_expand(line.lstrip("@-"), values)) for line in lines]


def _expand(text: str, values: dict[str, str]) -> str:
    for _ in range(10):  # nested variables (BIN := $(VENV)/bin)
        text = re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), ""), text)
    return text
