"""Plain numeric command-line options of the benchmarks, declared as table rows.

Most of a benchmark's knobs are a number with a default and a help line; one row each keeps
a long option list readable and the ``add_argument`` call in one place.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

# one row: the flag, its type, its default and its help line
NumberOption = tuple[str, Callable[[str], Any], Any, str]


def add_numbers(parser: argparse.ArgumentParser, rows: Iterable[NumberOption]) -> None:
    """Add one ``--flag`` of the given type and default per row, in the rows' order."""
    for flag, kind, default, text in rows:
        parser.add_argument(flag, type=kind, default=default, help=text)
