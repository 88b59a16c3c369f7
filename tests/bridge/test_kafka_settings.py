"""librdkafka settings of the telemetry producer (the command path's: tests/commands)."""

from __future__ import annotations

from bridge.config import BridgeConfig
from bridge.kafka_settings import producer_config


def test_producer_config_follows_design() -> None:
    conf = producer_config(BridgeConfig(kafka_extra="linger.ms=50"))
    assert conf["enable.idempotence"] is True
    assert conf["acks"] == "all"
    assert conf["partitioner"] == "murmur2_random"
    assert conf["linger.ms"] == "50"


def test_sparse_reports_keep_the_gapless_guarantee_only_without_a_message_timeout() -> None:
    assert producer_config(BridgeConfig())["enable.gapless.guarantee"] is True
    assert "enable.gapless.guarantee" not in producer_config(
        BridgeConfig(kafka_message_timeout_ms=30000)
    )
    assert "enable.gapless.guarantee" not in producer_config(
        BridgeConfig(kafka_report_per_message=True)
    )


def test_a_request_to_a_silent_node_times_out_well_before_librdkafkas_minute() -> None:
    """A Kafka node cut off without a reset held the bridge's writes for librdkafka's default
    60 s (compose host loss, 69 s): 15 s by default, settable."""
    assert producer_config(BridgeConfig())["socket.timeout.ms"] == 15000
    assert producer_config(BridgeConfig(kafka_socket_timeout_ms=5000))["socket.timeout.ms"] == 5000
