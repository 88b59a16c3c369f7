"""``iot-sim verify``: check a run's manifest against what reached Kafka, and report.

Writes ``report.json`` next to the manifest. Exit codes: 0 verified, 1 a failed verification
(or a runtime error), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from device_sim import manifest as manifest_io
from device_sim.cli_options import add_endpoint_args


def add_verify_parser(sub: Any, env: Mapping[str, str]) -> None:
    """The ``verify`` subcommand and its options (``sub``: the parser's subparsers)."""
    ver = sub.add_parser("verify", help="verify a run against Kafka")
    ver.add_argument(
        "run",
        nargs="?",
        default=None,
        help="run id, run directory or manifest file (default: the most recent run)",
    )
    ver.add_argument(
        "--wait-s",
        type=float,
        default=15.0,
        help="keep reading up to this long while acknowledged messages are missing",
    )
    ver.add_argument(
        "--from-beginning",
        action="store_true",
        help="scan the topics from their start instead of the recorded offsets",
    )
    ver.add_argument(
        "--json",
        dest="json_out",
        default=None,
        metavar="PATH",
        help="also write the JSON report to PATH ('-' = stdout instead of the summary)",
    )
    ver.add_argument(
        "--max-unacked-fraction",
        type=_fraction,
        default=manifest_io.DEFAULT_MAX_UNACKED_FRACTION,
        help="fail the run as inconclusive when more than this share of the telemetry sent was "
        "never acknowledged and never arrived (the load was not delivered); default "
        f"{manifest_io.DEFAULT_MAX_UNACKED_FRACTION}, 1 turns the rule off",
    )
    ver.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes that read the telemetry partitions in parallel (default 2; 1 reads "
        "in this process only)",
    )
    add_endpoint_args(ver, env)


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text}: a fraction between 0 and 1")
    return value


def verify_command(args: argparse.Namespace) -> int:
    """Verify the run, write its report; 0 when everything acknowledged arrived as expected."""
    from device_sim.verifier import summary, verify

    path = manifest_io.resolve(args.runs_dir, args.run)
    doc = manifest_io.read(path)
    report = verify(
        doc,
        bootstrap=args.kafka_bootstrap,
        topic_telemetry=args.topic_telemetry,
        topic_dlq=args.topic_dlq,
        topic_events=args.topic_events,
        wait_s=args.wait_s,
        from_beginning=args.from_beginning,
        max_unacked_fraction=args.max_unacked_fraction,
        workers=max(1, args.workers),
    )
    payload = report.to_dict()
    payload["run_id"] = doc["run_id"]
    payload["manifest"] = str(path)
    encoded = orjson.dumps(payload, option=orjson.OPT_INDENT_2)
    (path.parent / manifest_io.REPORT_NAME).write_bytes(encoded)
    if args.json_out == "-":
        sys.stdout.write(encoded.decode() + "\n")
    else:
        sys.stdout.write(summary(report, doc) + "\n")
        if args.json_out:
            Path(args.json_out).write_bytes(encoded)
    return 0 if report.ok else 1
