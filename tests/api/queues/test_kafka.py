"""The queue's Kafka side (api/queues/kafka.py): a consumer made and subscribed offline, its
buffer filled by hand as a poll would; the marker tracker wedged on real Kafka."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from api.queues import model as qm
from api.queues.kafka import MarkerTracker, QueueConsumer, Received
from tests.conftest import Endpoints


def test_a_buffered_record_keeps_its_delivery_token_until_committed_or_revoked() -> None:
    """A receive whose start markers timed out (written or not) and the next receive of the same
    record write one delivery (one token), not two that the owner would both redeliver."""
    consumer = QueueConsumer("127.0.0.1:9", "q")
    try:
        first, second = Received(0, 5, None, b"a", 0), Received(1, 5, None, b"b", 0)
        consumer._buffer.extend([first, second])
        tried = asyncio.run(consumer.fetch(2, 0.0))
        again = asyncio.run(consumer.fetch(2, 0.0))  # the first try's answer was a 503
        assert [r.token for r in again] == [r.token for r in tried] == [first.token, second.token]
        assert first.token != second.token
        assert Received(0, 5, None, b"a", 0).token != first.token  # read again: a new delivery
        assert Received(0, 5, None, b"a", 0) == first  # the token is no part of the record's value
        consumer._on_revoke(consumer._consumer, [TopicPartition("q", 0)])
        assert [r.token for r in asyncio.run(consumer.fetch(2, 0.0))] == [second.token]
    finally:
        consumer.close_blocking()


@pytest.mark.integration
def test_a_wedged_marker_tracker_is_replaced_and_reads_its_markers(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    """The tracker's first member paused once it owns the markers partitions (in its own
    thread, the tracker's hook): it reads nothing while markers arrive. After stall_s a new
    member of the tracker's group rebuilds its tables from the commit and reads every marker;
    without the check none would ever be read."""
    markers = topic_factory("markers-stall", partitions=2)
    tracker = MarkerTracker(stack.kafka_bootstrap, markers, partitions=2, grace_ms=0,
                            max_bytes=1 << 20, stall_s=3.0)  # fmt: skip
    wedged = threading.Event()

    def wedge(consumer: Consumer) -> None:
        if not wedged.is_set() and len(consumer.assignment()) == 2:
            consumer.pause(consumer.assignment())  # it fetches nothing from now on
            wedged.set()

    tracker.on_assigned = wedge
    tracker.start()
    try:
        assert wedged.wait(30), "never owned both partitions"
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        for i in range(20):  # ticks of no generation of its: read, nothing redelivered
            producer.produce(markers, qm.tick_marker("elsewhere", i), partition=i % 2)
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 30  # stall_s + a check + the new member's join, loaded
        while time.monotonic() < deadline and _read_to(tracker) != {0: 10, 1: 10}:
            time.sleep(0.1)
        assert _read_to(tracker) == {0: 10, 1: 10}  # each partition read to its end
        assert tracker.stall.renewals >= 1  # by a new member, not by the paused one
    finally:
        tracker.stop()


def _read_to(tracker: MarkerTracker) -> dict[int, int]:
    """The next offset each owned markers partition's table is to read."""
    return {p: o.table.next_offset for p, o in dict(tracker._owned).items()}
