"""Benchmark of the Spark streaming job: sustained rows/s, and freshness of device_minute.

    python -m bench.analytics_rate                      # private Kafka on free ports
    python -m bench.analytics_rate --kafka-bootstrap 127.0.0.1:9092 --records 200000

Phase 1, capacity: ``--records`` telemetry records (``--devices`` devices, one per second
each, ending 10 minutes ago) are produced to a fresh topic, then the whole job (all five
queries) runs with ``availableNow``: rows/s = records / wall time of the run (session start
excluded), plus each query's own processed rows/s from its progress.

Phase 2, freshness: devices publish ``--live-rate`` records/s with ``ts`` = now for
``--live-seconds`` while the job runs with ``--trigger`` and ``--watermark``; a poller reads the
device_minute table through its Delta log (delta-rs) every 0.5 s and notes when each minute first
becomes readable.
freshness = that time - the minute's end; the target is watermark + 30 s. "Keeps up" = every
batch of device_minute finished within the trigger interval and its input rows add up to
what was produced (no lag left over).

Bounded: both phases stop by themselves; everything lives under a temp dir.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.argtable import add_numbers

log = logging.getLogger("bench.analytics_rate")


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500_000,
        }
    )


def _record(device: int, seq: int, ts: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    body = {
        "ts": ts,
        "seq": seq,
        "metrics": {
            "temperature": 20.0 + (seq % 7) * 0.1,
            "humidity": 50.0 + (seq % 5),
            "battery": 90.0,
            "vibration": 0.1 + (seq % 3) * 0.01,
        },
    }
    headers = [("received_at", str(ts + 5).encode()), ("qos", b"1")]
    return f"bench-{device:05d}".encode(), json.dumps(body).encode(), headers


def _produce_backlog(bootstrap: str, topic: str, records: int, devices: int) -> None:
    p = _producer(bootstrap)
    per_device = max(1, records // devices)
    end = int(time.time() * 1000) - 600_000
    start = end - per_device * 1000
    for seq in range(1, per_device + 1):
        for d in range(devices):
            key, value, headers = _record(d, seq, start + seq * 1000)
            while True:
                try:
                    p.produce(topic, key=key, value=value, headers=headers)
                    break
                except BufferError:
                    p.poll(0.1)
        p.poll(0)
    p.flush(60)


def _config(bootstrap: str, topic: str, presence: str, root: Path, **kw: Any) -> Any:
    from spark_jobs.config import AnalyticsConfig

    return AnalyticsConfig.load(
        kafka_bootstrap=bootstrap,
        topic_telemetry=topic,
        topic_presence=presence,
        warehouse_dir=root / "warehouse",
        **kw,
    )


def _progress(warehouse: Path, query: str) -> list[dict[str, Any]]:
    path = warehouse / "_progress" / f"{query}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def capacity(
    spark: Any, bootstrap: str, root: Path, *, records: int, devices: int, master: str
) -> dict[str, Any]:
    from spark_jobs import stream
    from stack.topics import TopicSpec, ensure_topics

    topic, presence = f"bench.tel.{int(time.time())}", f"bench.pres.{int(time.time())}"
    ensure_topics(bootstrap, [TopicSpec(topic), TopicSpec(presence, compacted=True)], 6)
    t0 = time.monotonic()
    _produce_backlog(bootstrap, topic, records, devices)
    produce_s = time.monotonic() - t0
    cfg = _config(bootstrap, topic, presence, root / "capacity", spark_master=master)
    t0 = time.monotonic()
    rc = stream.run(cfg, available_now=True, spark=spark)
    run_s = time.monotonic() - t0
    per_query = {}
    for q in ("device_minute", "fleet_minute", "anomalies", "device_status", "rejects"):
        prog = [p for p in _progress(cfg.warehouse_dir, q) if p["input_rows"]]
        rows = sum(p["input_rows"] for p in prog)
        busy_ms = sum(p["batch_ms"] or 0 for p in prog)
        per_query[q] = {
            "rows": rows,
            "rows_per_s": round(rows / (busy_ms / 1000), 1) if busy_ms else None,
        }
    return {
        "records": records,
        "devices": devices,
        "produce_s": round(produce_s, 1),
        "job_exit": rc,
        "job_wall_s": round(run_s, 1),
        "job_rows_per_s": round(records / run_s, 1),
        "per_query": per_query,
    }


def _minutes_seen(table: Path, seen: dict[int, float]) -> None:
    """The minutes the Delta table holds now, through its log (delta-rs): a glob of its
    folder would also count the files a MERGE or an OPTIMIZE replaced."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    if not any((table / "_delta_log").glob("*.json")):
        return  # no commit yet
    try:
        col = DeltaTable(str(table)).to_pyarrow_table(columns=["window_end"]).column("window_end")
    except (OSError, ValueError, DeltaError):
        return  # a file of the version read was vacuumed meanwhile: next poll
    now = time.time()
    for v in col.to_pylist():
        end_ms = (
            int(v.timestamp() * 1000)
            if v.tzinfo
            else int(v.replace(tzinfo=dt.UTC).timestamp() * 1000)
        )
        seen.setdefault(end_ms, now)


def freshness(
    spark: Any, bootstrap: str, root: Path, *, rate: float, seconds: float, devices: int,
    trigger: str, watermark: str, master: str,
) -> dict[str, Any]:  # fmt: skip
    from spark_jobs import stream
    from stack.topics import TopicSpec, ensure_topics

    topic, presence = f"bench.live.{int(time.time())}", f"bench.livep.{int(time.time())}"
    ensure_topics(bootstrap, [TopicSpec(topic), TopicSpec(presence, compacted=True)], 6)
    cfg = _config(
        bootstrap, topic, presence, root / "freshness",
        spark_master=master, trigger_interval=trigger, watermark=watermark,
    )  # fmt: skip
    wm_s = _seconds(watermark)
    stop = threading.Event()
    job = threading.Thread(target=stream.run, args=(cfg,), kwargs={"spark": spark, "stop": stop})
    job.start()
    produced = 0
    p = _producer(bootstrap)
    seq = 0
    t_start = time.time()
    next_t = time.monotonic()
    interval = devices / rate  # seconds between rounds over all devices
    while time.time() - t_start < seconds:
        seq += 1
        now_ms = int(time.time() * 1000)
        for d in range(devices):
            key, value, headers = _record(d, seq, now_ms)
            p.produce(topic, key=key, value=value, headers=headers)
            produced += 1
        p.poll(0)
        next_t += interval
        time.sleep(max(0.0, next_t - time.monotonic()))
    p.flush(30)
    t_end = time.time()
    # the last whole minute that ended before production stopped
    last_full_end = int(t_end // 60) * 60 * 1000
    first_full_end = (int(t_start // 60) + 2) * 60 * 1000
    # keep producing a trickle so the watermark passes that minute (event time only advances
    # with data), then wait for it to become readable
    seen: dict[int, float] = {}
    deadline = time.time() + wm_s + 120
    table = cfg.warehouse_dir / "device_minute"
    while time.time() < deadline and last_full_end not in seen:
        now_ms = int(time.time() * 1000)
        key, value, headers = _record(0, 10_000_000 + int(time.time()), now_ms)
        p.produce(topic, key=key, value=value, headers=headers)
        p.poll(0)
        _minutes_seen(table, seen)
        time.sleep(0.5)
    p.flush(30)
    stop.set()
    job.join(120)
    lags = {
        end: round(seen[end] - end / 1000, 1)
        for end in sorted(seen)
        if first_full_end <= end <= last_full_end
    }
    prog = [x for x in _progress(cfg.warehouse_dir, "device_minute") if x["input_rows"]]
    trigger_ms = _seconds(trigger) * 1000
    return {
        "rate": rate,
        "seconds": seconds,
        "devices": devices,
        "trigger": trigger,
        "watermark": watermark,
        "produced": produced,
        "device_minute_input_rows": sum(x["input_rows"] for x in prog),
        "batches": len(prog),
        "batch_ms_max": max((x["batch_ms"] or 0 for x in prog), default=None),
        "batches_over_trigger": sum(1 for x in prog if (x["batch_ms"] or 0) > trigger_ms),
        "freshness_s_per_minute": {str(k): v for k, v in lags.items()},
        "freshness_s_median": statistics.median(lags.values()) if lags else None,
        "freshness_s_max": max(lags.values()) if lags else None,
        "target_s": wm_s + 30,
    }


def _seconds(duration: str) -> float:
    value, unit = duration.split()
    scale = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400}
    return float(value) * scale[unit.rstrip("s")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.analytics_rate", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--kafka-bootstrap", help="use this Kafka (default: a private one on free ports)"
    )
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    add_numbers(
        ap,
        [
            ("--records", int, 60_000, "capacity phase: backlog size"),
            ("--devices", int, 100, "simulated devices"),
            ("--live-rate", float, 200.0, "freshness phase: records/s"),
            ("--live-seconds", float, 150.0, "freshness phase: duration"),
        ],
    )
    ap.add_argument("--trigger", default="10 seconds", help="trigger interval (freshness phase)")
    ap.add_argument("--watermark", default="1 minute", help="watermark (freshness phase)")
    ap.add_argument("--skip-capacity", action="store_true", help="only the freshness phase")
    ap.add_argument("--skip-freshness", action="store_true", help="only the capacity phase")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    from spark_jobs.config import AnalyticsConfig
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="analytics-bench-") as tmp:
        root = Path(tmp)
        local = None
        bootstrap = args.kafka_bootstrap
        if bootstrap is None:
            from stack.config import StackConfig
            from stack.launcher import Stack

            local = Stack(
                # anonymous, explicitly: the benchmark measures the data path, not the log-in
                StackConfig.servers_on_free_ports(
                    root / "stack", partitions=6, kafka_heap="512m", insecure_anonymous=True
                )
            )
            local.up()
            bootstrap = local.kafka_bootstrap
        try:
            spark = build_session(AnalyticsConfig.load(spark_master=args.master), "analytics-bench")
            spark.sparkContext.setLogLevel("ERROR")
            result: dict[str, Any] = {"master": args.master}
            if not args.skip_capacity:
                result["capacity"] = capacity(
                    spark, bootstrap, root,
                    records=args.records, devices=args.devices, master=args.master,
                )  # fmt: skip
                print(json.dumps({"capacity": result["capacity"]}), flush=True)
            if not args.skip_freshness:
                result["freshness"] = freshness(
                    spark, bootstrap, root, rate=args.live_rate, seconds=args.live_seconds,
                    devices=args.devices, trigger=args.trigger, watermark=args.watermark,
                    master=args.master,
                )  # fmt: skip
                print(json.dumps({"freshness": result["freshness"]}), flush=True)
            spark.stop()
        finally:
            if local is not None:
                local.down()
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
