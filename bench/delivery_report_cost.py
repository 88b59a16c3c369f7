"""``python -m bench.delivery_report_cost``: what a Kafka delivery report costs the producer.

Produces 1 KiB records with the bridge's headers through confluent-kafka to a real Kafka
(started on free ports unless ``--bootstrap`` is given), asking for a delivery report on every
record, on every Nth, or on none, and prints the producing thread's CPU microseconds per
record (``time.thread_time``: produce, poll and the callbacks, not librdkafka's own threads).
Modes alternate within each round. This is the measurement behind the bridge's sparse
delivery reports (docs/bridge.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "bench.delivery-reports"


class _Entry:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False

    def delivered(self, _err: object, _msg: object) -> None:
        self.done = True


def measure(bootstrap: str, records: int, every: int, payload_bytes: int = 1024) -> float:
    """CPU us per record of the calling thread; a report on every ``every``-th record (0: none)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "queue.buffering.max.messages": records + 1000,
            "queue.buffering.max.kbytes": 4_000_000,
            "log_level": 3,
        }
    )
    value = b"x" * payload_bytes
    keys = [f"d-{i:05d}".encode() for i in range(1000)]
    headers: list[tuple[str, str | bytes | None]] = [
        ("mqtt_topic", b"devices/d-00001/telemetry"),
        ("received_at", b"1"),
        ("qos", b"1"),
    ]
    entries: list[_Entry] = []
    start = time.thread_time()
    for i in range(records):
        if every and i % every == 0:
            entry = _Entry()
            entries.append(entry)
            producer.produce(
                TOPIC, value, keys[i % 1000], on_delivery=entry.delivered, headers=headers
            )
        else:
            producer.produce(TOPIC, value, keys[i % 1000], headers=headers)
        if i % 500 == 0:
            producer.poll(0)
    while len(producer):
        producer.poll(0.001)
    used = time.thread_time() - start
    if not all(e.done for e in entries):
        raise RuntimeError("a delivery report did not arrive")
    return used / records * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.delivery_report_cost", description=__doc__)
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--every", default="1,100,0", help="report on every Nth record (0: none)")
    p.add_argument("--bootstrap", default="", help="an existing Kafka (topic made if missing)")
    args = p.parse_args(argv)
    modes = [int(x) for x in args.every.split(",")]

    from stack.topics import TopicSpec, ensure_topics

    def run(bootstrap: str) -> None:
        ensure_topics(bootstrap, [TopicSpec(TOPIC)], 12)
        for n in range(1, args.rounds + 1):
            for every in modes:
                us = measure(bootstrap, args.records, every)
                label = {0: "none", 1: "every record"}.get(every, f"every {every}th")
                print(f"round {n}: reports on {label}: {us:.2f} us/record", flush=True)

    if args.bootstrap:
        run(args.bootstrap)
        return 0
    from stack.config import StackConfig
    from stack.kafka_server import KafkaServer

    with tempfile.TemporaryDirectory(prefix="iot-dr-cost-") as tmp:
        cfg = StackConfig.servers_on_free_ports(Path(tmp), insecure_anonymous=True)
        kafka = KafkaServer(cfg)
        kafka.start()
        try:
            run(cfg.kafka_bootstrap)
        finally:
            kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
