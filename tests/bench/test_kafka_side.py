"""bench.kafka_side: reading a run's topic back (sequences, latency and its two legs)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from bench.kafka_side import received_at, verify_topic
from bench.payload import PayloadMaker, device_id
from tests.conftest import Endpoints


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("topic", b"t"), ("received_at", b"1795266000123")], 1_795_266_000_123),
        ([("received_at", b"soon")], None),
        ([("topic", b"t")], None),
        (None, None),
    ],
)
def test_received_at_reads_the_bridges_header(headers: object, expected: int | None) -> None:
    assert received_at(headers) == expected


@pytest.mark.integration
def test_verify_topic_splits_the_latency_at_the_bridges_header(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    # CreateTime topic: the record's time is the one produced, so every leg is known exactly
    topic = topic_factory("bench-verify", partitions=2)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    t0 = 1_795_266_000_000
    devices = [device_id(i) for i in range(2)]
    for seq in range(50):
        for i, dev in enumerate(devices):
            ts = t0 + seq * 10
            header: list[tuple[str, str | bytes | None]] = [
                ("received_at", str(ts + 2 + i).encode())
            ]
            producer.produce(
                topic,
                PayloadMaker(dev, 200).make(ts, seq),
                dev.encode(),
                i,
                timestamp=ts + 10,
                headers=header if seq % 5 else None,
            )
    assert producer.flush(30) == 0

    v = verify_topic(stack.kafka_bootstrap, topic, dict.fromkeys(devices, 50), latency_from_ms=t0)

    assert (v.check.lost, v.check.duplicates, v.check.reordered, v.records) == (0, 0, 0, 100)
    assert (v.latency_p50_ms, v.latency_p99_ms) == (10.0, 10.0)
    # 80 records carry the header: 40 at 2 ms to the bridge (8 after), 40 at 3 ms (7 after)
    assert v.to_bridge_p50_ms == pytest.approx(2.5)
    assert v.to_bridge_p99_ms == pytest.approx(3.0)
    assert v.to_kafka_p50_ms == pytest.approx(7.5)
    assert v.to_kafka_p99_ms == pytest.approx(8.0)
