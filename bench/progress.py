"""Progress lines of a benchmark run: stderr, flushed, so stdout keeps only the result."""

from __future__ import annotations

import sys


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
