"""librdkafka settings of the bridge's producer and consumers, from `BridgeConfig`.

Pure: builds dictionaries, opens nothing. The telemetry path and the command path
(``commands/kafka_settings.py``) follow the same producer rules (the design's: idempotent,
``acks=all``, the Java client's partitioner so that a device keeps its partition); only their
batching differs.
"""

from __future__ import annotations

from typing import Any

from bridge.config import BridgeConfig, kafka_client_security, parse_kafka_extra

__all__ = [
    "consumer_security",
    "producer_config",
    "producer_rules",
]


def producer_rules(config: BridgeConfig, linger_ms: int) -> dict[str, Any]:
    """The design's producer rules, which the command path's producer follows too."""
    return {
        "bootstrap.servers": config.kafka_bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": linger_ms,
        "compression.type": config.kafka_compression,
        "message.timeout.ms": config.kafka_message_timeout_ms,
        "socket.timeout.ms": config.kafka_socket_timeout_ms,
        **kafka_client_security(config),
    }


def producer_config(config: BridgeConfig) -> dict[str, Any]:
    """librdkafka settings of the bridge's (telemetry) producer."""
    conf = producer_rules(config, config.kafka_linger_ms)
    conf.update(
        {
            "client.id": config.mqtt_client_id,
            "batch.size": config.kafka_batch_size,
            # librdkafka's own queue must never be the bound: the pending window is.
            "queue.buffering.max.messages": config.pending_max_messages + 70000,
            "queue.buffering.max.kbytes": (2 * config.pending_max_bytes) // 1024 + 65536,
            "socket.nagle.disable": True,
        }
    )
    if config.kafka_message_timeout_ms == 0 and not config.kafka_report_per_message:
        # sparse delivery reports: a marker's success must mean every record before it on its
        # partition is in Kafka; a failure that would skip one is then fatal instead
        conf["enable.gapless.guarantee"] = True
    conf.update(parse_kafka_extra(config.kafka_extra))
    return conf


def consumer_security(config: BridgeConfig) -> dict[str, Any]:
    """The security settings (typed ones, then ``IOT_KAFKA_EXTRA``'s; the rest of
    ``kafka_extra`` is producer tuning)."""
    return kafka_client_security(config)
