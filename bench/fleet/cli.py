"""``python -m bench.fleet``: run the fleet benchmark, or re-render a run's JSON (``--render``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from bench.commands.errors import BenchError
from bench.fleet import report
from bench.fleet.options import from_args, parser
from bench.progress import say
from bench.run_files import write_run


def write(doc: dict[str, Any], out_dir: Path, name: str) -> list[Path]:
    return write_run(doc, out_dir, name, report.markdown, report.plot)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    p.add_argument("--render", type=Path, help="re-render this fleet JSON (no run)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.render is not None:
        doc = json.loads(args.render.read_text())
        for path in write(doc, args.render.parent, args.render.stem):
            say(f"wrote {path}")
        return 0
    opts = from_args(args)
    from bench.fleet.run import run

    try:
        doc = run(opts)
    except BenchError as exc:
        say(f"bench-fleet: {exc}")
        return 1
    for path in write(doc, opts.out_dir, opts.name):
        say(f"wrote {path}")
    return 0 if doc["verdict"]["ok"] else 1
