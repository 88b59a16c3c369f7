"""The command path's settings: the bridge's (which it extends) and its own."""

import argparse
import dataclasses
from pathlib import Path

import pytest

from bridge.config import BridgeConfig, env_name
from bridge.errors import ConfigError
from commands.config import CommandConfig, add_arguments, from_namespace

OWN = [
    f for f in dataclasses.fields(CommandConfig) if f.name not in BridgeConfig.__dataclass_fields__
]


def test_defaults_are_valid_and_match_design_topics() -> None:
    cfg = CommandConfig()
    assert cfg.topic_commands == "iot.commands"
    assert cfg.topic_command_status == "iot.command-status"
    assert cfg.topic_command_replies == "iot.command-replies"
    assert cfg.topic_commands_dlq == "iot.commands.dlq"
    assert cfg.commands_enabled is False
    assert cfg.command_http_port == 9101
    assert cfg.topic_telemetry == "iot.telemetry"  # the bridge's settings are there too


def test_it_extends_the_bridge_settings_with_its_own() -> None:
    assert isinstance(CommandConfig(), BridgeConfig)
    names = {f.name for f in OWN}
    assert "commands_enabled" in names
    assert "topic_commands" in names
    assert all(n.startswith(("command", "topic_command")) for n in names), names


def test_bool_from_env_and_flag() -> None:
    assert CommandConfig.load([], environ={"IOT_COMMANDS_ENABLED": "yes"}).commands_enabled
    assert not CommandConfig.load(
        ["--no-commands-enabled"], environ={"IOT_COMMANDS_ENABLED": "1"}
    ).commands_enabled
    with pytest.raises(ConfigError):
        CommandConfig.load([], environ={"IOT_COMMANDS_ENABLED": "maybe"})


def test_precedence_over_both_kinds_of_setting() -> None:
    env = {"IOT_MQTT_HOST": "envhost", "IOT_COMMAND_TIMEOUT_MS": "7000"}
    cfg = CommandConfig.load(["--command-timeout-ms", "8000"], environ=env)
    assert cfg.mqtt_host == "envhost"  # env beats default, a bridge setting
    assert cfg.command_timeout_ms == 8000  # flag beats env, its own
    assert CommandConfig.load([], environ={}, command_max_attempts=5).command_max_attempts == 5
    assert from_namespace(argparse.Namespace(), {"IOT_TOPIC_COMMANDS": "x.cmd"}).topic_commands == (
        "x.cmd"
    )


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"topic_commands": "bad topic"}, "topic_commands"),
        ({"topic_commands_dlq": ""}, "topic_commands_dlq"),
        ({"command_timeout_ms": 0}, "command_timeout_ms"),
        ({"command_max_attempts": 0}, "command_max_attempts"),
        ({"command_group_id": ""}, "command_group_id"),
        ({"command_mqtt_client_id": "x" * 121}, "command_mqtt_client_id"),
        ({"command_max_inflight": 0}, "command_max_inflight"),
        ({"command_mqtt_publishers": 65}, "command_mqtt_publishers"),
        ({"command_fetch_wait_ms": 1001}, "command_fetch_wait_ms"),
        ({"command_linger_ms": -1}, "command_linger_ms"),
        ({"command_http_port": 70000}, "command_http_port"),
        ({"command_consumer_stall_s": 0.0}, "command_consumer_stall_s"),
        ({"mqtt_port": 0}, "mqtt_port"),  # the bridge's checks hold too
    ],
)
def test_invalid_values_rejected(changes: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid command path configuration: .*{named}"):
        CommandConfig(**changes)  # type: ignore[arg-type]


def test_with_changes_keeps_the_kind() -> None:
    cfg = CommandConfig().with_changes(command_max_attempts=4, mqtt_port=2000)
    assert isinstance(cfg, CommandConfig)
    assert (cfg.command_max_attempts, cfg.mqtt_port) == (4, 2000)


def test_every_setting_has_help_and_a_flag() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = parser.format_help()
    for f in dataclasses.fields(CommandConfig):
        assert f.metadata["help"]
        assert "--" + f.name.replace("_", "-") in text
        assert env_name(f.name) in text


def test_operator_docs_list_its_own_settings() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text()
    for f in OWN:
        assert f"`{f.name}`" in text, f.name
