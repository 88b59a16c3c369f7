"""The queue's Kafka side without a broker (api/queues/kafka.py): a consumer is made and
subscribed offline, its buffer filled by hand as a poll would."""

from __future__ import annotations

import asyncio

from confluent_kafka import TopicPartition

from api.queues.kafka import QueueConsumer, Received


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
