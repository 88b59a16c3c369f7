"""Sparse delivery reports: one report per Kafka partition and socket read (bridge.pipeline,
bridge.pending.Segment), with fake clients."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError

from bridge.config import BridgeConfig
from bridge.partitioner import partition_for
from bridge.service import TelemetryBridge
from tests.bridge.fakes import GOOD, FakeProducer, FakeSubscriber, make_rig

PARTITIONS = 3


def _device_on(partition: int, skip: int = 0) -> str:
    """A device id whose key lands on ``partition`` (the ``skip``-th such id)."""
    found = [
        f"d{i}" for i in range(200) if partition_for(f"d{i}".encode(), PARTITIONS) == partition
    ]
    return found[skip]


A, A2, B = _device_on(0), _device_on(0, 1), _device_on(1)


@pytest.fixture
def sparse(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[TelemetryBridge, FakeProducer, FakeSubscriber]]:
    settings = getattr(request, "param", {})
    bridge = TelemetryBridge(
        BridgeConfig(pending_max_messages=100, pending_max_bytes=100_000, **settings)
    )
    bridge.partition_counts["iot.telemetry"] = PARTITIONS
    yield from make_rig(bridge)


def _publish(bridge: TelemetryBridge, device: str, mid: int) -> None:
    bridge.on_publish(f"devices/{device}/telemetry", GOOD, 1, mid, False)


def test_only_the_last_record_of_each_partition_in_a_read_asks_for_a_report(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = sparse
    for mid, device in enumerate((A, B, A2, A), start=1):
        _publish(bridge, device, mid)
    # the newest record of each partition is held back until the read ends
    assert [(k, cb is None) for _t, k, cb in producer.queue] == [
        (A.encode(), True),
        (A2.encode(), True),
    ]
    bridge.on_read_done()
    keys = [(k, cb is None) for _t, k, cb in producer.queue]
    assert keys == [
        (A.encode(), True),
        (A2.encode(), True),
        (A.encode(), False),
        (B.encode(), False),
    ]
    assert producer.partitions == [0, 0, 0, 1]
    producer.deliver(3)  # partition 1's marker: message 2, but 1 is not confirmed yet
    bridge._drain()
    assert sub.acks == []
    producer.deliver(2)  # partition 0's marker covers 1, 3 and 4
    bridge._drain()
    assert sub.acks == [1, 2, 3, 4]
    assert bridge.window.count == 0
    assert bridge.stats.produced["telemetry"] == 4


def test_a_failed_marker_fails_every_record_it_covers(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = sparse
    for mid, device in enumerate((A, A2, B), start=1):
        _publish(bridge, device, mid)
    bridge.on_read_done()
    producer.deliver(2)  # B's marker: fine
    producer.deliver(1, KafkaError(KafkaError.REQUEST_TIMED_OUT))  # A's marker covers 1 and 2
    bridge._drain()
    assert sub.acks == []  # nothing of the failed segment, nor what came after it
    assert sub.dropped == 1  # Mosquitto redelivers all three
    # counted per message left unacknowledged: the read's three (one group)
    assert bridge.stats.kafka_errors["REQUEST_TIMED_OUT"] == 3


def test_a_general_record_goes_out_after_the_held_ones(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = sparse
    _publish(bridge, A, 1)
    bridge.on_publish(f"devices/{A}/telemetry", b"nope", 1, 2, False)  # to the DLQ
    assert [(t, cb is None) for t, _k, cb in producer.queue] == [
        ("iot.telemetry", False),
        ("iot.dlq", False),
    ]
    producer.deliver(0)
    producer.deliver(1)
    bridge._drain()
    assert sub.acks == [1, 2]


def test_a_full_producer_queue_moves_the_held_records_to_the_backlog_in_order(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = sparse
    _publish(bridge, A, 1)
    _publish(bridge, B, 2)
    producer.full = True
    _publish(bridge, A2, 3)  # A's record cannot be produced: every held one is backlogged
    _publish(bridge, B, 4)
    bridge.on_read_done()
    assert producer.queue == []
    assert sub.paused
    producer.full = False
    bridge._drain()  # retries the backlog
    got = [
        (k, cb is None, p)
        for (_t, k, cb), p in zip(producer.queue, producer.partitions, strict=True)
    ]
    assert got == [
        (A.encode(), False, 0),
        (B.encode(), False, 1),
        (A2.encode(), False, 0),
        (B.encode(), False, 1),
    ]
    for i in range(4):
        producer.deliver(i)
    bridge._drain()
    assert sub.acks == [1, 2, 3, 4]
    assert not sub.paused


@pytest.mark.parametrize("sparse", [{"kafka_report_per_message": True}], indirect=True)
def test_report_per_message_asks_every_record_for_one(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, _sub = sparse
    for mid, device in enumerate((A, A2, B), start=1):
        _publish(bridge, device, mid)
    assert [cb is None for _t, _k, cb in producer.queue] == [False, False, False]
    assert producer.partitions == [-1, -1, -1]


@pytest.mark.parametrize("sparse", [{"kafka_message_timeout_ms": 30000}], indirect=True)
def test_a_message_timeout_turns_sparse_reports_off(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, _sub = sparse
    _publish(bridge, A, 1)
    assert [cb is None for _t, _k, cb in producer.queue] == [False]


def test_random_reads_keep_each_partitions_order_and_ack_everything(
    sparse: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = sparse
    rng = random.Random(7)
    devices = [f"d{i}" for i in range(12)]
    arrived: list[str] = []
    mid = 0
    for _read in range(30):
        for _ in range(rng.randrange(1, 8)):
            mid += 1
            device = rng.choice(devices)
            arrived.append(device)
            _publish(bridge, device, mid)
        bridge.on_read_done()
        # deliver the reports of what was produced so far, partitions in random order
        waiting = [i for i, (_t, _k, cb) in enumerate(producer.queue) if cb is not None]
        rng.shuffle(waiting)
        for i in waiting[: rng.randrange(len(waiting) + 1)]:
            producer.deliver(i)
            producer.queue[i] = (producer.queue[i][0], producer.queue[i][1], lambda *_: None)
        bridge._drain()
    for i, (_t, _k, cb) in enumerate(producer.queue):
        if cb is not None:
            producer.deliver(i)
    bridge._drain()
    produced = [k.decode() for _t, k, _cb in producer.queue]
    for partition in range(PARTITIONS):

        def on(seq: list[str], p: int = partition) -> list[str]:
            return [d for d in seq if partition_for(d.encode(), PARTITIONS) == p]

        assert on(produced) == on(arrived)
    assert sub.acks == list(range(1, mid + 1))
