from __future__ import annotations

from pathlib import Path

import pytest

from stack.config import StackConfig
from stack.errors import StackError


def test_defaults_are_the_design_ports() -> None:
    cfg = StackConfig()
    assert (cfg.mqtt_port, cfg.kafka_port, cfg.controller_port) == (1883, 9092, 9093)
    assert cfg.partitions == 12
    assert cfg.data_dir == Path("var").resolve()


def test_env_overrides_defaults_and_flags_override_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_MQTT_PORT", "11883")
    monkeypatch.setenv("IOT_PARTITIONS", "3")
    monkeypatch.setenv("IOT_STACK_BRIDGE", "false")
    cfg = StackConfig.from_env(partitions=6, kafka_port=None)
    assert cfg.mqtt_port == 11883  # from env
    assert cfg.partitions == 6  # the flag wins over env
    assert cfg.kafka_port == 9092  # None means "flag not given"
    assert cfg.with_bridge is False


def test_bad_env_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_KAFKA_PORT", "ninety")
    with pytest.raises(StackError, match="IOT_KAFKA_PORT='ninety'"):
        StackConfig.from_env()


@pytest.mark.parametrize(
    ("field", "value"), [("mqtt_port", 70000), ("partitions", 0), ("kafka_port", 0)]
)
def test_invalid_values_are_rejected(field: str, value: int) -> None:
    with pytest.raises(StackError):
        StackConfig(**{field: value})  # type: ignore[arg-type]


def test_wildcard_bind_is_reached_on_loopback() -> None:
    cfg = StackConfig(bind_host="0.0.0.0", kafka_port=19092)
    assert cfg.kafka_bootstrap == "127.0.0.1:19092"
    assert cfg.controller_port == 19093


def test_servers_on_free_ports_are_distinct_and_only_the_servers(tmp_path: Path) -> None:
    cfg = StackConfig.servers_on_free_ports(tmp_path, partitions=3)
    ports = {cfg.mqtt_port, cfg.kafka_port, cfg.controller_port}
    assert len(ports) == 3
    assert (cfg.with_bridge, cfg.with_api, cfg.with_analytics, cfg.devices, cfg.partitions) == (
        False,
        False,
        False,
        0,
        3,
    )


def test_servers_on_free_ports_log_clients_in_unless_told_otherwise(tmp_path: Path) -> None:
    # the test fixtures' stacks: authentication on, as `iot-stack up`; bench/ asks for anonymous
    assert StackConfig.servers_on_free_ports(tmp_path).insecure_anonymous is False
    open_broker = StackConfig.servers_on_free_ports(tmp_path, insecure_anonymous=True)
    assert open_broker.insecure_anonymous is True


def test_commands_mode_defaults_to_separate_and_reads_its_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (StackConfig().commands_mode, StackConfig().commands_http_port) == ("separate", 9101)
    monkeypatch.setenv("IOT_STACK_COMMANDS_MODE", "inline")
    monkeypatch.setenv("IOT_STACK_COMMANDS_HTTP_PORT", "19101")
    cfg = StackConfig.from_env()
    assert (cfg.commands_mode, cfg.commands_http_port) == ("inline", 19101)
    assert StackConfig.from_env(commands_mode="off").commands_mode == "off"  # the flag wins


@pytest.mark.parametrize(
    "changes",
    [
        {"commands_mode": "both"},
        {"commands_http_port": 0},
        {"api_port": 0},
        {"bridge_http_port": 70000},
        # both processes on one port
        {"bridge_http_port": 9200, "commands_http_port": 9200, "commands_mode": "separate"},
    ],
)
def test_bad_command_path_settings_are_rejected(changes: dict[str, object]) -> None:
    with pytest.raises(StackError):
        StackConfig(**changes)  # type: ignore[arg-type]


def test_one_port_for_both_is_fine_when_no_separate_process_runs() -> None:
    cfg = StackConfig(bridge_http_port=9200, commands_http_port=9200, commands_mode="inline")
    assert cfg.bridge_http_port == cfg.commands_http_port


def test_a_cluster_gives_every_client_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_KAFKA_NODES", "3")
    cfg = StackConfig.from_env(kafka_port=19092)
    assert cfg.kafka_nodes == 3
    assert cfg.kafka_bootstrap == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"


def test_an_external_cluster_is_what_clients_get(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_STACK_KAFKA_BOOTSTRAP", "k1:9092,k2:9092")
    assert StackConfig.from_env().kafka_bootstrap == "k1:9092,k2:9092"


@pytest.mark.parametrize(
    "changes",
    [
        {"kafka_nodes": 0},
        {"kafka_nodes": 3, "kafka_node_id": 4},
        {"kafka_nodes": 3, "kafka_port": 19092, "kafka_controller_port": 19094},
        {"kafka_nodes": 3, "kafka_node_hosts": "a,b"},
    ],
)
def test_impossible_clusters_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(StackError):
        StackConfig(**changes)  # type: ignore[arg-type]


def test_a_cluster_on_free_ports_takes_consecutive_ones(tmp_path: Path) -> None:
    cfg = StackConfig.servers_on_free_ports(tmp_path, kafka_nodes=3)
    ports = [p for n in cfg.kafka_layout for p in (n.port, n.controller_port)]
    assert ports == list(range(cfg.kafka_port, cfg.kafka_port + 6))
    assert cfg.mqtt_port not in ports


def test_iot_api_is_on_by_default_at_3904_and_reads_its_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = StackConfig()
    assert (cfg.with_api, cfg.api_port, cfg.api_console) == (True, 3904, False)
    monkeypatch.setenv("IOT_STACK_API", "0")
    monkeypatch.setenv("IOT_STACK_API_PORT", "13904")
    monkeypatch.setenv("IOT_STACK_CONSOLE", "1")
    cfg = StackConfig.from_env()
    assert (cfg.with_api, cfg.api_port, cfg.api_console) == (False, 13904, True)
