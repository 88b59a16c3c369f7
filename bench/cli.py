"""``python -m bench``: run the benchmark suites and write their results."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from bench.argtable import add_numbers
from bench.suite_options import ALL_CONTENDERS, ROOT, SHARDED_CONTENDERS, SuiteOptions
from stack.mqtt_shards import MAX_SHARDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of the IoT appliance, run on demand (never in the test command).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a suite: starts its own Mosquitto + Kafka on free ports, stops them at the end",
    )
    run.add_argument("--suite", choices=["ingest"], default="ingest", help="which suite")
    run.add_argument(
        "--quick",
        action="store_true",
        help="short runs (3 s each, 1 KiB only, no 10,000-device run): a smoke test, ~3 min",
    )
    add_numbers(
        run,
        [
            ("--duration", float, None, "seconds of load per run (default 10)"),
            ("--devices", int, 1000, "devices in the load (1000)"),
            (
                "--many-devices",
                int,
                None,
                "devices of the scaling run (10000; --quick: none unless given)",
            ),
        ],
    )
    run.add_argument(
        "--payloads",
        default=None,
        help="comma-separated payload sizes in bytes (default 1024,200; --quick: 1024)",
    )
    run.add_argument(
        "--contenders",
        default=",".join(ALL_CONTENDERS),
        help=f"comma-separated subset of: {', '.join(ALL_CONTENDERS)}",
    )
    add_numbers(
        run,
        [
            ("--publisher-processes", int, 2, "publisher processes (2)"),
            (
                "--window",
                int,
                20_000,
                "most messages published but not yet delivered (bounds Mosquitto's backlog)",
            ),
            (
                "--repeat",
                int,
                None,
                "throughput runs per contender and payload, interleaved; the best counts "
                "(default 3; --quick: 1); the report gives min-max over them",
            ),
        ],
    )
    run.add_argument(
        "--bridge-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a BridgeConfig setting for iot-bridge, e.g. mqtt_receive_maximum=65535 "
        "(repeatable; default: the bridge's own defaults)",
    )
    run.add_argument(
        "--mq-bridge-args",
        default="",
        help="extra arguments for bench.mqbridge_route, e.g. '--batch-size 2048 --linger-ms 5'",
    )
    run.add_argument(
        "--mosquitto-autosave-changes",
        type=int,
        default=None,
        metavar="N",
        help="Mosquitto saves its store every N changes (default: the stack's, "
        "IOT_MQTT_AUTOSAVE_CHANGES; 0: every 5 s); docs/benchmarks.md shows what N costs",
    )
    run.add_argument(
        "--mqtt-shards",
        type=int,
        default=1,
        metavar="N",
        help="N Mosquitto shards behind HAProxy, as `iot-stack up --mqtt-shards N` (default 1: "
        f"one Mosquitto); contenders then: {', '.join(SHARDED_CONTENDERS)}",
    )
    run.add_argument("--no-latency", action="store_true", help="skip the half-load latency runs")
    run.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the unmeasured warm-up run of our bridge before the first round",
    )
    run.add_argument("--no-scaling", action="store_true", help="skip the scaling runs")
    run.add_argument(
        "--bridge-processes",
        default=None,
        help="comma-separated process counts of our bridge's scaling runs on one shared "
        "subscription (default 2,4; --quick: 2), e.g. 1,2,3",
    )
    run.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results",
        help="directory for ingest.json / ingest.md / ingest.png (bench/results)",
    )
    run.add_argument(
        "--data-dir", type=Path, help="where the stack keeps its data (default: a new temp dir)"
    )
    run.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    report = sub.add_parser(
        "report", help="re-render the Markdown table and PNG plot from a result JSON"
    )
    report.add_argument("json", type=Path, help="a result JSON written by `run`")
    report.add_argument(
        "--out", type=Path, help="directory to write to (default: the JSON's directory)"
    )
    return parser


def _report(args: argparse.Namespace) -> int:
    import json

    from bench.report import from_json, write_all

    try:
        run = from_json(json.loads(args.json.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"bench: cannot read {args.json}: {exc}", file=sys.stderr)
        return 1
    for kind, path in write_all(run, args.out or args.json.parent).items():
        print(f"wrote {kind}: {path}", file=sys.stderr)
    return 0


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    if args.command == "report":
        return _report(args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    contenders = tuple(c.strip() for c in args.contenders.split(",") if c.strip())
    unknown = [c for c in contenders if c not in ALL_CONTENDERS]
    if unknown:
        print(f"unknown contenders: {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        payloads = tuple(
            int(p) for p in (args.payloads or ("1024" if args.quick else "1024,200")).split(",")
        )
    except ValueError:
        print("--payloads must be comma-separated integers", file=sys.stderr)
        return 2
    settings = []
    for item in args.bridge_setting:
        name, sep, value = item.partition("=")
        if not sep or not name:
            print(f"--bridge-setting needs NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        settings.append((name.strip(), value.strip()))
    try:
        processes = tuple(
            int(p) for p in (args.bridge_processes or ("2" if args.quick else "2,4")).split(",")
        )
    except ValueError:
        print("--bridge-processes must be comma-separated integers", file=sys.stderr)
        return 2
    if not 1 <= args.mqtt_shards <= MAX_SHARDS:
        print(f"--mqtt-shards must be 1-{MAX_SHARDS}, got {args.mqtt_shards}", file=sys.stderr)
        return 2
    unsharded = [c for c in contenders if c not in SHARDED_CONTENDERS]
    if args.mqtt_shards > 1 and unsharded:
        print(
            f"--mqtt-shards {args.mqtt_shards} runs only {', '.join(SHARDED_CONTENDERS)}; "
            f"leave out {', '.join(unsharded)} (--contenders)",
            file=sys.stderr,
        )
        return 2
    if (args.mosquitto_autosave_changes or 0) < 0:
        print("--mosquitto-autosave-changes must be >= 0", file=sys.stderr)
        return 2
    if any(p < 1 for p in processes):
        print("--bridge-processes must be >= 1", file=sys.stderr)
        return 2
    options = SuiteOptions(
        quick=args.quick,
        duration_s=args.duration or (3.0 if args.quick else 10.0),
        devices=args.devices,
        many_devices=(0 if args.quick else 10_000)
        if args.many_devices is None
        else args.many_devices,
        payloads=payloads,
        publisher_processes=args.publisher_processes,
        window=args.window,
        contenders=contenders,
        latency=not args.no_latency,
        warmup=not args.no_warmup,
        scaling=not args.no_scaling,
        bridge_processes=processes,
        repeats=args.repeat or (1 if args.quick else 3),
        bridge_settings=tuple(settings),
        mq_bridge_args=tuple(args.mq_bridge_args.split()),
        mosquitto_autosave_changes=args.mosquitto_autosave_changes,
        mqtt_shards=args.mqtt_shards,
        out_dir=args.out,
        data_dir=args.data_dir,
    )
    from bench.report import write_all
    from bench.suite import run_suite

    # SIGTERM (kill, a CI timeout) unwinds like Ctrl-C: the runs' and the suite's `finally`
    # stop the contender and the stack, which the default action would leave running
    before = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        run = run_suite(options)
    except Exception as exc:  # noqa: BLE001 - the CLI boundary: report, exit 1
        print(f"bench: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, before)
    paths = write_all(run, options.out_dir)
    print(paths["md"].read_text())
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}", file=sys.stderr)
    failed = [r for r in run.results if r.error]
    return 1 if failed else 0
