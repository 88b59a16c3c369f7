"""``iot-analytics``: the streaming job, SQL over the tables, the fleet report, anomaly scoring.

    iot-analytics stream [--available-now]        # Kafka -> Parquet tables (runs until stopped)
    iot-analytics stream --spark-master spark://127.0.0.1:7077   # on a Spark standalone cluster
    iot-analytics sql "SELECT * FROM fleet_minute ORDER BY window_start DESC LIMIT 5"
    iot-analytics report --since -2h --out var/report [--format html]
    iot-analytics score [--manifest PATH]         # anomaly precision/recall vs a simulator run

Settings come from ``IOT_*`` environment variables (see ``docs/analytics.md``); the flags
below override them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from appconfig import kafka_security
from spark_jobs import __version__
from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import AnalyticsError, ConfigError, QueryError

log = logging.getLogger("spark_jobs")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


class _CliHandler(logging.StreamHandler):
    """The handler main() installs (replaced, not stacked, when main() runs again)."""


def _setup_logging(verbose: bool) -> None:
    handler = _CliHandler(sys.stderr)
    fmt = os.environ.get("IOT_LOG_FORMAT", "auto")
    if fmt == "json" or (fmt == "auto" and not sys.stderr.isatty()):
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _CliHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # pyspark logs every failed query with its whole JVM stack; the CLI reports the error itself
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # so for SQL text


# Options whose value may start with "-": a relative time (`--since -2h`).
RELATIVE_VALUE_OPTIONS = frozenset({"--since", "--until"})
_NEGATIVE_VALUE = re.compile(r"-\.?\d")


def attach_negative_values(argv: Sequence[str], options: Collection[str]) -> list[str]:
    """``[--since, -2h]`` -> ``[--since=-2h]`` for the given options.

    argparse reads a token that starts with "-" and is not a plain negative number as an
    option, so ``--since -2h`` failed with "expected one argument". Attached with "=" it is
    the option's value; the value's own check (``report.parse_time``) then judges it.
    """
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":  # the rest is positional
            out.extend(argv[i:])
            break
        if arg in options and i + 1 < len(argv) and _NEGATIVE_VALUE.match(argv[i + 1]):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that accepts ``--since -2h`` (see :func:`attach_negative_values`)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = sys.argv[1:] if args is None else args
        return super().parse_known_args(
            attach_negative_values(argv, RELATIVE_VALUE_OPTIONS), namespace
        )


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="iot-analytics",
        description="Fleet analytics on Spark: streaming tables from Kafka, SQL, reports. "
        "Every setting also reads an IOT_* environment variable (docs/analytics.md).",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = _Parser(add_help=False)
    common.add_argument("--warehouse-dir", type=Path, help="table folder (env IOT_WAREHOUSE_DIR)")
    common.add_argument(
        "--spark-master", "--master", dest="master", metavar="URL",
        help="where Spark runs: local[N], local[*] or spark://host:port, a standalone "
        "cluster such as `iot-stack up --spark-workers N` starts (env IOT_SPARK_MASTER)",
    )  # fmt: skip
    common.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("stream", parents=[common], help="run the streaming job")
    s.add_argument(
        "--available-now", action="store_true",
        help="process what Kafka holds now, then stop (a bounded run)",
    )  # fmt: skip
    s.add_argument("--kafka-bootstrap", help="Kafka bootstrap servers (env IOT_KAFKA_BOOTSTRAP)")
    s.add_argument("--checkpoint-dir", type=Path, help="checkpoints (env IOT_CHECKPOINT_DIR)")
    s.add_argument("--topic-telemetry", help="telemetry topic (env IOT_TOPIC_TELEMETRY)")
    s.add_argument("--topic-presence", help="presence topic (env IOT_TOPIC_PRESENCE)")
    s.add_argument(
        "--trigger", help="trigger interval, e.g. '10 seconds' (env IOT_TRIGGER_INTERVAL)"
    )
    s.add_argument("--watermark", help="event-time watermark, e.g. '2 minutes' (env IOT_WATERMARK)")
    s.add_argument(
        "--starting-offsets", choices=["earliest", "latest"],
        help="where a new query starts (env IOT_STARTING_OFFSETS)",
    )  # fmt: skip
    s.add_argument(
        "--max-offsets-per-trigger", type=int,
        help="records per micro-batch cap (env IOT_MAX_OFFSETS_PER_TRIGGER)",
    )  # fmt: skip

    q = sub.add_parser("sql", parents=[common], help="run a SQL query over the tables")
    q.add_argument(
        "query",
        help="Spark SQL; the tables are named after their folders, Delta tables with time "
        "travel (VERSION AS OF n, TIMESTAMP AS OF '...') and table_changes('<table>', n)",
    )
    q.add_argument(
        "--format", choices=["table", "csv", "json"], default="table",
        help="output format (default: an aligned text table)",
    )  # fmt: skip
    q.add_argument("--max-rows", type=int, default=1000, help="rows printed at most (default 1000)")
    q.add_argument(
        "--engine", choices=["spark", "duckdb"], default="spark",
        help="spark: Spark SQL (default; time travel, table_changes); duckdb: DuckDB's SQL over "
        "the tables' current versions read with delta-rs, no Spark",
    )  # fmt: skip

    r = sub.add_parser("report", parents=[common], help="write the batch fleet report")
    r.add_argument("--since", help="range start: ISO time or relative (-2h, -30m, -1d)")
    r.add_argument("--until", help="range end: ISO time or relative")
    r.add_argument("--out", type=Path, default=Path("var/report"), help="output folder")
    r.add_argument("--format", choices=["md", "html"], default="md", help="summary format")
    r.add_argument("--top", type=int, default=10, help="rows in the top-N sections")
    r.add_argument("--noise-metric", default="temperature", help="metric ranking 'noisiest'")
    r.add_argument("--tenant", default="default", help="whose fleet (default: the default tenant)")

    c = sub.add_parser("score", parents=[common], help="anomaly precision/recall vs a sim run")
    c.add_argument("--manifest", type=Path, help="iot-sim manifest.json (default: latest run)")
    c.add_argument("--runs-dir", type=Path, default=Path("var/sim-runs"), help="iot-sim runs dir")
    return p


def _config(args: argparse.Namespace) -> AnalyticsConfig:
    overrides: dict[str, Any] = {
        "warehouse_dir": args.warehouse_dir,
        "spark_master": args.master,
    }
    if args.command == "stream":
        overrides |= {
            "kafka_bootstrap": args.kafka_bootstrap,
            "checkpoint_dir": args.checkpoint_dir,
            "topic_telemetry": args.topic_telemetry,
            "topic_presence": args.topic_presence,
            "trigger_interval": args.trigger,
            "watermark": args.watermark,
            "starting_offsets": args.starting_offsets,
            "max_offsets_per_trigger": args.max_offsets_per_trigger,
        }
    return AnalyticsConfig.load(**overrides)


def _cmd_stream(cfg: AnalyticsConfig, args: argparse.Namespace) -> int:
    from spark_jobs import stream

    stop = threading.Event()
    stream.install_stop_signals(stop)
    return stream.run(cfg, available_now=args.available_now, stop=stop)


def _cmd_sql(cfg: AnalyticsConfig, args: argparse.Namespace) -> int:
    from spark_jobs import sql

    out = sql.run_query(cfg, args.query, max_rows=args.max_rows, engine=args.engine)
    sys.stdout.write(sql.render(out, args.format))
    return 0


def _cmd_report(cfg: AnalyticsConfig, args: argparse.Namespace) -> int:
    from spark_jobs import report

    rng = report.ReportRange(
        since=report.parse_time(args.since) if args.since else None,
        until=report.parse_time(args.until) if args.until else None,
        tenant=args.tenant,
    )
    # no Spark: the tables are read through their logs with delta-rs (spark_jobs.lake)
    path = report.write_report(
        cfg, args.out, rng, fmt=args.format, top=args.top, noise_metric=args.noise_metric
    )
    sys.stdout.write(f"{path}\n")
    return 0


def _cmd_score(cfg: AnalyticsConfig, args: argparse.Namespace) -> int:
    from spark_jobs import sql
    from spark_jobs.anomaly import score_against_manifest

    path = args.manifest or _latest_manifest(args.runs_dir)
    manifest = json.loads(path.read_text())
    # the simulator's devices are the default tenant's
    query = "SELECT device_id, seq, metric FROM anomalies WHERE tenant = 'default'"
    detected = sql.run_query(cfg, query, max_rows=None, engine="duckdb")  # no Spark needed
    found = [(str(r[0]), int(r[1]), str(r[2])) for r in detected.itertuples(index=False)]
    devices = set((manifest.get("devices") or {}).keys())
    if devices:
        found = [f for f in found if f[0] in devices]
    s = score_against_manifest(found, manifest)
    sys.stdout.write(
        json.dumps(
            {
                "manifest": str(path),
                "true_positives": s.true_positives,
                "false_positives": s.false_positives,
                "false_negatives": s.false_negatives,
                "precision": round(s.precision, 4),
                "recall": round(s.recall, 4),
            }
        )
        + "\n"
    )
    return 0


def _latest_manifest(runs_dir: Path) -> Path:
    found = sorted(runs_dir.glob("*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise AnalyticsError(f"no manifest under {runs_dir}; pass --manifest")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        cfg = _config(args)
        kafka_security.use_config(cfg, ConfigError)
    except ConfigError as exc:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"iot-analytics: error: {exc}\n")
        return 2
    handlers = {
        "stream": _cmd_stream,
        "sql": _cmd_sql,
        "report": _cmd_report,
        "score": _cmd_score,
    }
    try:
        return handlers[args.command](cfg, args)
    except QueryError as exc:  # a query Spark refused: a usage error, one line
        sys.stderr.write(f"iot-analytics: error: {exc}\n")
        return 2
    except AnalyticsError as exc:
        sys.stderr.write(f"iot-analytics: {exc}\n")
        return 1
    except Exception as exc:  # a Spark AnalysisException, a bad query: say it, exit 1
        if type(exc).__name__ in ("AnalysisException", "ParseException"):
            sys.stderr.write(f"iot-analytics: {exc}\n")
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
