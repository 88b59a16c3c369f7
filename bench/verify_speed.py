"""How fast ``iot-sim verify`` reads Kafka (issue 19: >= 200,000 records/s on 2 cores).

Fills a fresh topic with simulator-format telemetry exactly as the bridge writes it (the device
payload of :class:`device_sim.device.DeviceScript`, mapped by :func:`bridge.mapping.map_message`,
lz4 like the bridge's producer), then times :func:`device_sim.verifier.verify` over it with
each ``--workers`` count, ``--repeat`` times each, alternating. Every run is one JSON line in
``--out`` (wall, records/s, CPU of this process and its workers, peak RSS, the verdict)::

    python -m bench.verify_speed --records 2000000 --workers 1,2 --repeat 2

Without ``--kafka-bootstrap`` it starts its own Mosquitto + Kafka on free ports (the launcher).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.machine import loadavg
from bench.progress import say
from bridge.mapping import Topics, map_message
from device_sim.device import DeviceScript
from device_sim.spec import FleetSpec
from device_sim.verifier import verify

RUN_ID = "verifyspeed"
METRICS = {"temperature": 21.5, "humidity": 40.25, "vibration": 0.0123}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.verify_speed", description=__doc__)
    p.add_argument("--records", type=int, default=2_000_000, help="telemetry records (2000000)")
    p.add_argument("--devices", type=int, default=1_000, help="devices they come from (1000)")
    p.add_argument("--payload-bytes", type=int, default=512, help="payload size (512)")
    p.add_argument("--partitions", type=int, default=12, help="topic partitions (12)")
    p.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated")
    p.add_argument("--repeat", type=int, default=2, help="runs per worker count (2)")
    p.add_argument("--kafka-bootstrap", default=None, help="use this Kafka (default: its own)")
    p.add_argument("--topic", default=None, help="topic name (default: a new one)")
    p.add_argument(
        "--filled", action="store_true", help="--topic is already filled by an earlier run"
    )
    p.add_argument(
        "--out", type=Path, default=Path("bench/results/verify_speed.jsonl"), help="JSON lines"
    )
    return p


@contextlib.contextmanager
def _kafka(bootstrap: str | None, partitions: int) -> Iterator[str]:
    if bootstrap is not None:
        yield bootstrap
        return
    from bench.commands.stack_setup import own_stack

    with (
        tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp,
        own_stack(Path(tmp), partitions) as servers,
    ):
        yield servers.bootstrap


def fill(bootstrap: str, topic: str, records: int, devices: int, payload_bytes: int) -> int:
    """Produce ``records`` telemetry records of ``devices`` devices (round-robin, seqs in order
    per device) as the bridge maps them; returns the Kafka ms of the first one."""
    spec = FleetSpec(devices=devices, payload_bytes=payload_bytes, seed=19)
    scripts = [DeviceScript(spec, i, RUN_ID) for i in range(devices)]
    topics = Topics(telemetry=topic)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "log_level": 3,
        }
    )
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    for n in range(records):
        script = scripts[n % devices]
        seq = n // devices + 1
        ts = now_ms + n // 1000
        payload = script.encode(ts, seq, METRICS)
        rec = map_message(
            script.telemetry_topic, payload, 1, ts + 7, topics=topics, max_payload_bytes=1 << 20
        )
        while True:
            try:
                headers: Any = rec.headers
                producer.produce(rec.topic, rec.value, rec.key, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    say(f"filled {topic}: {records:,} records in {time.monotonic() - started:.1f} s")
    return now_ms


def manifest(records: int, devices: int, started_ms: int) -> dict[str, Any]:
    """What the verifier expects: device i sent the seqs the fill gave it."""
    spec = FleetSpec(devices=devices, seed=19)
    sent = {spec.device_id(i): records // devices + (1 if i < records % devices else 0)
            for i in range(devices)}  # fmt: skip
    return {
        "run_id": RUN_ID,
        "devices": {d: {"sent": n, "qos": 1} for d, n in sent.items() if n},
        "started_at_ms": started_ms,
        "ended_at_ms": started_ms + records // 1000 + 1,
    }


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, reaped by the pool
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def time_one(bootstrap: str, topic: str, doc: dict[str, Any], workers: int) -> dict[str, Any]:
    load_before = loadavg()
    cpu0 = _cpu_s()
    t0 = time.monotonic()
    report = verify(
        doc,
        bootstrap=bootstrap,
        topic_telemetry=topic,
        topic_dlq=f"{topic}.dlq",  # empty: the run expects no DLQ record
        wait_s=0.0,
        from_beginning=True,
        on_progress=None,
        workers=workers,
    )
    wall = time.monotonic() - t0
    return {
        "workers": workers,
        "records": report.received,
        "wall_s": round(wall, 2),
        "records_per_s": round(report.received / wall),
        "cpu_s": round(_cpu_s() - cpu0, 2),
        "peak_rss_mb_self": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "peak_rss_mb_worker": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
        ),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "verdict": {
            "ok": report.ok,
            "unique": report.unique,
            "missing": report.missing,
            "duplicates": report.duplicates,
            "order_violations": report.order_violations,
            "p50_ms": report.latency.p50_ms,
            "p99_ms": report.latency.p99_ms,
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w.strip()]
    with _kafka(args.kafka_bootstrap, args.partitions) as bootstrap:
        topic = args.topic or f"bench.verify.{int(time.time())}"
        if not args.filled:
            from bench.kafka_side import create_topics

            create_topics(bootstrap, [topic, f"{topic}.dlq"], args.partitions)
            started = fill(bootstrap, topic, args.records, args.devices, args.payload_bytes)
        else:
            started = int(time.time() * 1000)
        doc = manifest(args.records, args.devices, started)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        ok = True
        for _ in range(args.repeat):
            for workers in counts:
                row = time_one(bootstrap, topic, doc, workers)
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                row |= {
                    "at": at,
                    "payload_bytes": args.payload_bytes,
                    "partitions": args.partitions,
                }
                say(json.dumps(row))
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")
                ok = ok and row["verdict"]["ok"] and row["records"] == args.records
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
