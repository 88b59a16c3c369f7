"""Queues with per-message ack over Kafka (``/queues``)."""
