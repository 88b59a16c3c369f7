"""``python -m bench.soak``: run the soak benchmark, or re-render a run's JSON (``--render``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from bench.progress import say
from bench.run_files import write_run
from bench.soak import report
from bench.soak.options import SoakOptions, from_args, parser


def write(doc: dict[str, Any], out_dir: Path, name: str) -> list[Path]:
    return write_run(doc, out_dir, name, report.markdown, report.plot)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    p.add_argument("--render", type=Path, help="re-render this soak JSON (no run)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.render is not None:
        from bench.soak.run import summarize

        doc = json.loads(args.render.read_text())
        opts = SoakOptions(**{**doc["options"], "out_dir": args.render.parent})
        doc = summarize(doc, opts)
        for path in write(doc, args.render.parent, args.render.stem):
            say(f"wrote {path}")
        return 0
    opts = from_args(args)
    from bench.soak.run import run

    doc = run(opts)
    for path in write(doc, opts.out_dir, opts.name):
        say(f"wrote {path}")
    say("verdict: " + ("OK" if doc["verdict"]["ok"] else "; ".join(doc["verdict"]["failures"])))
    return 0 if doc["verdict"]["ok"] else 1
