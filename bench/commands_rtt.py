"""Command round trip benchmark: ``python -m bench.commands_rtt`` (``make bench-commands``).

The entry point only; the benchmark itself is the ``bench.commands`` package (what it
measures and how: its docstring).
"""

from __future__ import annotations

import sys

from bench.commands.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
