"""``python -m bench.shards``: the ingest ceiling and our bridge on one Mosquitto against
`--mqtt-shards N` (issue 36), alternating, ``--runs`` times each.

Each run is one ingest suite (its own Mosquitto or shards + HAProxy, and Kafka, on free ports):
the ceiling and our bridge at QoS 1, one round per payload. The suites alternate (1 shard, N
shards, 1 shard, ...) so that a machine that drifts hurts both alike. Every suite's own report
goes to ``--out``/run<i>-<n>shard/; the comparison, with where the cores went, to
``--out``/shards.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.argtable import add_numbers
from bench.machine import loadavg
from bench.progress import say
from bench.results import LIMIT, OURS
from bench.shard_table import ShardRun, shard_ranges, shard_table
from bench.suite_options import ROOT, SuiteOptions, SuiteRun
from stack.mqtt_shards import MAX_SHARDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__)
    add_numbers(
        parser,
        [
            ("--runs", int, 3, "suites per shard count (3)"),
            ("--shards", int, 2, "the shard count set against one Mosquitto (2)"),
            ("--duration", float, 10.0, "seconds of load per run (10)"),
            ("--devices", int, 1000, "devices in the load (1000)"),
        ],
    )
    parser.add_argument("--payloads", default="1024,200", help="payload sizes (1024,200)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "shards", help="where to write"
    )
    return parser


def _suite(shards: int, args: argparse.Namespace, payloads: tuple[int, ...], out: Path) -> SuiteRun:
    from bench.report import write_all
    from bench.suite import run_suite

    options = SuiteOptions(
        duration_s=args.duration,
        devices=args.devices,
        payloads=payloads,
        contenders=(LIMIT, OURS),
        latency=False,
        scaling=False,
        repeats=1,
        mqtt_shards=shards,
        out_dir=out,
    )
    run = run_suite(options)
    write_all(run, out)
    return run


def to_markdown(runs: list[tuple[int, int, SuiteRun]], payloads: tuple[int, ...]) -> str:
    table_runs: list[ShardRun] = [(i, n, run.results) for i, n, run in runs]
    first = runs[0][2].machine
    lines = [
        "# One MQTT shard against several (`python -m bench.shards`)",
        "",
        f"Machine: {first.get('cpu')}, {first.get('cores')} cores. Each run is one ingest "
        "suite (ceiling, then our bridge at QoS 1 ack-after-Kafka, one round per payload), "
        "the shard counts alternating; every suite's own report is beside this file.",
        "",
        "| run | shards | started | load average before / after |",
        "|---|---|---|---|",
    ]
    for i, n, run in runs:
        m = run.machine
        lines.append(
            f"| {i} | {n} | {run.started_at} | {' '.join(m.get('loadavg_before', []))} / "
            f"{' '.join(m.get('loadavg_after', []))} |"
        )
    lines += ["", *shard_ranges(table_runs, payloads), ""]
    lines.append(shard_table(table_runs, payloads, int(first.get("cores") or 0)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        payloads = tuple(int(p) for p in args.payloads.split(","))
    except ValueError:
        print("--payloads must be comma-separated integers", file=sys.stderr)
        return 2
    if not 2 <= args.shards <= MAX_SHARDS:
        print(f"--shards must be 2-{MAX_SHARDS}, got {args.shards}", file=sys.stderr)
        return 2
    if args.runs < 1 or args.devices < 1 or args.duration <= 0:
        print("--runs, --devices and --duration must be positive", file=sys.stderr)
        return 2
    runs: list[tuple[int, int, SuiteRun]] = []
    for i in range(1, args.runs + 1):
        for n in (1, args.shards):
            say(f"run {i}, {n} shard(s); load average {' '.join(loadavg())}")
            t0 = time.monotonic()
            try:
                run = _suite(n, args, payloads, args.out / f"run{i}-{n}shard")
            except Exception as exc:  # noqa: BLE001 - the CLI boundary: report, exit 1
                print(f"bench.shards: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
            say(f"run {i}, {n} shard(s) took {time.monotonic() - t0:.0f} s")
            runs.append((i, n, run))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "shards.md"
    path.write_text(to_markdown(runs, payloads))
    print(path.read_text())
    failed = [r for _, _, run in runs for r in run.results if r.error]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
