"""An SSE stream's reader (api/sawmill/kafka.py, `Follower`) that librdkafka wedges is replaced
where it stood (issue 32), on a real Kafka; an idle one never is."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from api.sawmill.kafka import Follower, StreamWatch
from api.sawmill.model import Message, parse_start
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration
STALL_S = 1.5  # checked every 0.5 s


def _send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=f"k{i}".encode())
    assert producer.flush(30) == 0


def _read(follower: Follower, want: int, within_s: float) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + within_s
    while len(got) < want and time.monotonic() < deadline:
        got += follower.poll(100, 0.2)
    return got


def test_a_wedged_stream_reader_is_replaced_and_the_records_sent_meanwhile_arrive(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("sse-stall", partitions=2)
    watch = StreamWatch(STALL_S)
    follower = Follower(stack.kafka_bootstrap, topic, parse_start("end"), watch)
    try:
        _send(stack.kafka_bootstrap, topic, [b"a%d" % i for i in range(5)])
        assert sorted(m.value for m in _read(follower, 5, 30)) == [b"a%d" % i for i in range(5)]
        assert _read(follower, 1, 3 * STALL_S) == []  # idle at the end: never a stall
        assert watch.tally.renewals == 0
        # wedged: it fetches nothing from here on (this thread is the one that polls it)
        follower._consumer.pause(follower._consumer.assignment())
        sent = [b"b%d" % i for i in range(10)]
        _send(stack.kafka_bootstrap, topic, sent)
        got = _read(follower, 10, 30)
        assert sorted(m.value for m in got) == sent  # every one, once: nothing skipped
        assert watch.tally.renewals == 1
        assert watch.tally.failures == 0
    finally:
        follower.close()
