"""The consumer groups' committed offsets, asked in a child process (librdkafka#5040 crashes
the asking process when a group's coordinator moved): read from a real Kafka, and a child that
crashes (SIGSEGV, as librdkafka's does) or hangs is replaced while the caller gets its answer."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from api.console.group_offsets import GroupOffsets
from appconfig.kafka_security import client_base
from tests.conftest import Endpoints


def _committed_group(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer({**client_base(bootstrap), "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    finally:
        consumer.close()


def test_offsets_are_read_and_a_crashed_or_hung_child_is_replaced(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic = topic_factory("groups", partitions=1)
    group = group_factory()
    _committed_group(stack.kafka_bootstrap, topic, group)
    offsets = GroupOffsets(client_base(stack.kafka_bootstrap), timeout_s=2.0)
    try:
        found = offsets.committed([group, "no-such-group-here"])
        assert found[group] == [(topic, 0, 7)]
        assert found["no-such-group-here"] == []  # Kafka 4 answers an unknown group so
        first = offsets._child
        assert first is not None

        os.kill(first.pid, signal.SIGSEGV)  # what librdkafka#5040 does to it
        first.join(10)
        assert offsets.committed([group])[group] == [(topic, 0, 7)]  # a new child answered
        assert offsets.renewals == 1
        assert offsets._child is not first

        hung = offsets._child
        os.kill(hung.pid, signal.SIGSTOP)  # a child that never answers: killed, replaced
        assert offsets.committed([group])[group] == [(topic, 0, 7)]
        assert offsets.renewals == 2
        assert not hung.is_alive()
        assert offsets.failures == 0

        alive = offsets._child
        offsets.forget()  # Kafka seen down: the next request starts from a fresh child
        assert offsets._child is None
        assert not alive.is_alive()
        assert offsets.committed([group])[group] == [(topic, 0, 7)]
        assert offsets.renewals == 3
    finally:
        offsets.close()
    assert offsets._child is None
