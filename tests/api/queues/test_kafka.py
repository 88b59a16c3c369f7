"""The queue's Kafka side without a broker (api/queues/kafka.py): a consumer is made and
subscribed offline."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from api.queues.kafka import QueueConsumer, Received


def test_a_buffered_record_keeps_its_delivery_token_until_committed_or_revoked() -> None:
    """A receive whose start markers timed out (written or not) and the next receive of the same
    record write one delivery (one token), not two that the owner would both redeliver."""
    consumer = QueueConsumer("127.0.0.1:9", "q")
    try:
        first, second = Received(0, 5, None, b"a", 0), Received(1, 5, None, b"b", 0)
        token = consumer.token(first)
        assert consumer.token(first) == token
        assert consumer.token(Received(0, 5, b"k", b"a", 0)) == token  # by partition and offset
        assert consumer.token(second) != token
        consumer._on_revoke(consumer._consumer, [TopicPartition("q", 0)])
        assert consumer.token(first) != token  # its new owner's record now
        assert consumer.token(second) == consumer.token(second)
    finally:
        consumer.close_blocking()
