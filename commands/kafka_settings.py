"""librdkafka settings of the command path's producer and ``iot.commands`` consumer.

Pure: builds dictionaries, opens nothing. The producer follows the bridge's producer rules
(``bridge/kafka_settings.py``) with its own linger; consumers take only the security settings
of ``IOT_KAFKA_EXTRA``.
"""

from __future__ import annotations

from typing import Any

from bridge.config import parse_kafka_extra
from bridge.kafka_settings import consumer_security, producer_rules
from commands.config import CommandConfig

__all__ = ["commands_consumer_settings", "producer_settings"]


def producer_settings(config: CommandConfig) -> dict[str, Any]:
    """librdkafka producer settings of the command path (the design's producer rules)."""
    settings = producer_rules(config, config.command_linger_ms)
    settings.update(parse_kafka_extra(config.kafka_extra))
    return settings


def commands_consumer_settings(config: CommandConfig) -> dict[str, Any]:
    """librdkafka settings of the command path's ``iot.commands`` consumer: offsets are stored
    by the service once a command's status is written (at-least-once), committed in the
    background."""
    settings: dict[str, Any] = {
        "bootstrap.servers": config.kafka_bootstrap,
        "group.id": config.command_group_id,
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 1000,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # A fetch returns after command_fetch_wait_ms unless 1 MB is waiting: with the
        # default fetch.min.bytes=1 every fetch returned the moment one command arrived,
        # a fetch per command, and the broker spent ~0.4 of a core per 1,000 commands/s.
        "fetch.wait.max.ms": config.command_fetch_wait_ms,
        "fetch.min.bytes": 1 << 20,
    }
    settings.update(consumer_security(config))
    return settings
