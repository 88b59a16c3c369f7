"""librdkafka settings of the command path, beside the telemetry producer's."""

from bridge.kafka_settings import consumer_security, producer_config
from commands.config import CommandConfig
from commands.kafka_settings import commands_consumer_settings, producer_settings


def test_both_producers_follow_the_design_rules_with_their_own_linger() -> None:
    cfg = CommandConfig(kafka_linger_ms=50, command_linger_ms=2, kafka_extra="sasl.mechanism=PLAIN")
    telemetry, commands = producer_config(cfg), producer_settings(cfg)
    for conf in (telemetry, commands):
        assert conf["enable.idempotence"] is True
        assert conf["acks"] == "all"
        assert conf["partitioner"] == "murmur2_random"
        assert conf["sasl.mechanism"] == "PLAIN"
    assert (telemetry["linger.ms"], commands["linger.ms"]) == (50, 2)
    assert "batch.size" in telemetry
    assert "batch.size" not in commands


def test_consumers_take_only_the_security_settings_of_kafka_extra() -> None:
    cfg = CommandConfig(
        kafka_extra="security.protocol=SASL_SSL,ssl.ca.location=/ca.pem,linger.ms=5",
        command_group_id="g1",
    )
    assert consumer_security(cfg) == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "/ca.pem",
    }
    conf = commands_consumer_settings(cfg)
    assert conf["group.id"] == "g1"
    assert conf["enable.auto.offset.store"] is False
    assert conf["security.protocol"] == "SASL_SSL"
    assert "linger.ms" not in conf
