"""`python -m bench.chaos` (`make chaos`): the chaos matrix, or a subset of it."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from bench.chaos.names import (
    CLUSTER_SERVICES,
    FAULT_HELP,
    FAULTS,
    SERVICES,
    ChaosUsageError,
    cells,
    check_edge_pair,
    select,
    select_services,
)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    p.add_argument(
        "--services",
        help=f"comma-separated, of: {', '.join(SERVICES)}; with --kafka-nodes 3 "
        f"{', '.join(CLUSTER_SERVICES)} instead of kafka (default all)",
    )
    p.add_argument(
        "--faults",
        help="comma-separated, of: "
        + "; ".join(f"{k} ({v})" for k, v in FAULT_HELP.items())
        + " (default all)",
    )
    p.add_argument(
        "--kafka-nodes",
        type=int,
        default=1,
        help="1 (default) or 3: `up --kafka-nodes 3`, the replicated KRaft cluster; its "
        "services kafka-broker (a node that is not the active controller, chosen at fault "
        "time) and kafka-controller (the active controller at fault time)",
    )
    p.add_argument(
        "--no-analytics",
        action="store_true",
        help="run the stack without the Spark job (its cells are then not run)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results/chaos.md"),
        help="where the matrix goes (Markdown)",
    )
    p.add_argument(
        "--cut-s",
        type=float,
        default=60.0,
        help="how long the edge cell's cut60 cuts the site's link (s; default 60, as the "
        "fault's name says; shorter for a quick run)",
    )
    p.add_argument("--keep", action="store_true", help="leave the stack running at the end")
    p.add_argument("--dry-run", action="store_true", help="print the cells and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        services = select_services(args.services, args.kafka_nodes)
        faults = select(args.faults, FAULTS, "fault")
        check_edge_pair(args.services, args.faults)
        if not args.cut_s > 0:
            raise ChaosUsageError(f"--cut-s {args.cut_s:g}: the cut must last more than 0 s")
    except ChaosUsageError as exc:
        print(f"python -m bench.chaos: error: {exc}", file=sys.stderr)
        return 2
    if args.no_analytics:
        services = [s for s in services if s != "analytics"]
    todo = cells(services, faults)
    if args.dry_run or not todo:
        for service, fault in todo:
            print(f"{service} x {fault}")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from bench.chaos import report, run  # the servers' clients only when a run starts

    started = time.time()
    command = " ".join(argv if argv is not None else sys.argv[1:])

    title = "Chaos matrix" + (" (3 Kafka nodes)" if args.kafka_nodes == 3 else "")

    def write(results: list[run.Cell]) -> str:
        text = (
            f"# {title}\n\nRun {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} "
            f"(`python -m bench.chaos {command}`).\n\n"
            "Each cell: `lost / duplicates / seconds until every service was ready and every "
            "client path answered again`.\n\n"
            + report.table(results, services, faults)
            + "\n\n"
            + report.details(results)
            + "\n"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        return text

    results = run.run(
        todo,
        analytics=not args.no_analytics,
        keep=args.keep,
        on_cell=write,
        kafka_nodes=args.kafka_nodes,
        cut_s=args.cut_s,
    )
    print(write(results))
    return 0
