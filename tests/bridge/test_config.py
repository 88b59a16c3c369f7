import argparse
import dataclasses

import pytest

from bridge.config import BridgeConfig, add_arguments, env_name, parse_kafka_extra, settings
from bridge.errors import ConfigError


def test_defaults_are_valid_and_match_design_topics() -> None:
    cfg = BridgeConfig()
    assert cfg.topic_telemetry == "iot.telemetry"
    assert cfg.topic_events == "iot.events"
    assert cfg.topic_dlq == "iot.dlq"
    assert cfg.topic_presence == "iot.presence"
    assert cfg.max_payload_bytes == 64 * 1024
    # the command path's settings are its own (tests/commands/test_config.py)
    assert not hasattr(cfg, "topic_commands")
    assert not hasattr(cfg, "commands_enabled")


def test_precedence_defaults_env_flags() -> None:
    env = {"IOT_MQTT_PORT": "1999", "IOT_TOPIC_TELEMETRY": "x.tel", "IOT_MQTT_HOST": "envhost"}
    cfg = BridgeConfig.load(["--mqtt-port", "2001"], environ=env)
    assert cfg.mqtt_port == 2001  # flag beats env
    assert cfg.topic_telemetry == "x.tel"  # env beats default
    assert cfg.mqtt_host == "envhost"
    assert cfg.kafka_bootstrap == "localhost:9092"  # default


def test_overrides_beat_flags() -> None:
    cfg = BridgeConfig.load(["--mqtt-port", "2001"], environ={}, mqtt_port=3000)
    assert cfg.mqtt_port == 3000


def test_bool_from_env_and_flag() -> None:
    env = "IOT_KAFKA_REPORT_PER_MESSAGE"
    assert BridgeConfig.load([], environ={env: "yes"}).kafka_report_per_message
    assert not BridgeConfig.load(
        ["--no-kafka-report-per-message"], environ={env: "1"}
    ).kafka_report_per_message
    with pytest.raises(ConfigError):
        BridgeConfig.load([], environ={env: "maybe"})


def test_bad_env_type_is_config_error() -> None:
    with pytest.raises(ConfigError, match="IOT_MQTT_PORT"):
        BridgeConfig.load([], environ={"IOT_MQTT_PORT": "abc"})


@pytest.mark.parametrize(
    "changes",
    [
        {"mqtt_port": 0},
        {"mqtt_receive_maximum": 70000},
        {"mqtt_share_group": "a/b"},
        {"kafka_compression": "brotli"},
        {"topic_dlq": "bad topic"},
        {"pending_max_bytes": 10, "max_payload_bytes": 100},
        {"log_level": "LOUD"},
        {"kafka_extra": "novalue"},
        {"mqtt_reconnect_min_s": 5.0, "mqtt_reconnect_max_s": 1.0},
    ],
)
def test_invalid_values_rejected(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        BridgeConfig(**changes)  # type: ignore[arg-type]


def test_frozen() -> None:
    cfg = BridgeConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.mqtt_port = 1  # type: ignore[misc]


def test_every_setting_has_help_and_a_flag() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = parser.format_help()
    for f in settings():
        assert f.metadata["help"]
        assert "--" + f.name.replace("_", "-") in text
        assert env_name(f.name) in text


def test_share_group_subscriptions() -> None:
    assert BridgeConfig().mqtt_subscriptions == (
        "devices/+/telemetry",
        "devices/+/events",
        "devices/+/status",
        "tenants/+/devices/+/telemetry",
        "tenants/+/devices/+/events",
        "tenants/+/devices/+/status",
    )
    shared = BridgeConfig(mqtt_share_group="g").mqtt_subscriptions
    assert shared[0] == "$share/g/devices/+/telemetry"
    assert shared[3] == "$share/g/tenants/+/devices/+/telemetry"


def test_tenant_settings() -> None:
    cfg = BridgeConfig.load([], {"IOT_TENANT_QUOTAS": "acme=5,beta=0.5"})
    assert cfg.tenant_quotas == "acme=5,beta=0.5"
    for bad in ("acme", "acme=0", "acme=-1", "=3", "acme=x"):
        with pytest.raises(ConfigError, match="tenant_quotas"):
            BridgeConfig(tenant_quotas=bad)
    with pytest.raises(ConfigError, match="registry_topic"):
        BridgeConfig(registry_topic="no spaces")
    with pytest.raises(ConfigError, match="tenant_refresh_s"):
        BridgeConfig(tenant_refresh_s=0)


def test_kafka_extra_and_redaction() -> None:
    assert parse_kafka_extra("a=1, b = x=y ,") == {"a": "1", "b": "x=y"}
    cfg = BridgeConfig(mqtt_password="s3cret")
    assert cfg.redacted()["mqtt_password"] == "***"
    assert cfg.redacted()["mqtt_host"] == "localhost"


def test_unknown_override_rejected() -> None:
    with pytest.raises(ConfigError):
        BridgeConfig.load([], environ={}, no_such_setting=1)


def test_operator_docs_list_every_setting() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "bridge.md").read_text()
    for f in settings():
        if not f.name.startswith("command_"):  # the command path documents its own
            assert f"`{env_name(f.name)}`" in text, f.name
