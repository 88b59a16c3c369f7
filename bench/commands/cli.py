"""``python -m bench.commands_rtt``: parse, run on a private or given stack, print and write."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.commands.errors import BenchError
from bench.commands.options import build_parser, usage_problem
from bench.commands.report import full_document, write_outputs
from bench.commands.run import run
from bench.commands.stack_setup import Servers, own_stack
from bench.load import LoadError
from bench.machine import loadavg, machine_info
from bench.responder import ResponderError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if problem := usage_problem(args):
            parser.error(problem)
    except SystemExit as exc:  # --help (0) and usage errors (2) as exit codes
        return int(exc.code or 0)
    machine = machine_info()
    t0 = time.monotonic()
    try:
        if args.mqtt_port is not None:
            result = run(args, Servers("127.0.0.1", args.mqtt_port, args.kafka_bootstrap))
        else:
            with (
                tempfile.TemporaryDirectory(prefix="cmd-rtt-stack-") as tmp,
                own_stack(Path(tmp), args.partitions, args.mosquitto_autosave_changes) as servers,
            ):
                result = run(args, servers)
    except (BenchError, LoadError, ResponderError) as exc:
        print(f"commands_rtt: {exc}", file=sys.stderr)
        return 1
    machine["loadavg_after"] = loadavg()
    doc = asdict(result)
    print(json.dumps(doc, indent=2))
    full = full_document(
        doc,
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        wall_s=round(time.monotonic() - t0, 1),
        argv=sys.argv[1:] if argv is None else argv,
        machine=machine,
    )
    write_outputs(full, args.out, args.out_dir)
    return 0 if result.missing == 0 else 1
