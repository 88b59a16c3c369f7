"""What `up --bridges N` renders: N bridge processes on one shared subscription (no process
is started here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stack.cli import _config, _parser
from stack.config import StackConfig
from stack.errors import StackError
from stack.launcher import Stack


def _stack(tmp_path: Path, **changes: object) -> Stack:
    return Stack(StackConfig(data_dir=tmp_path, **changes))  # type: ignore[arg-type]


def test_one_bridge_is_the_unshared_bridge_of_before(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    assert [name for name, _ in stack.services()] == [
        "mosquitto", "kafka", "bridge", "commands", "api",
    ]  # fmt: skip
    env = stack.bridge().env
    # its client id stays the bridge's default (iot-bridge): the persistent session of before
    assert "IOT_MQTT_CLIENT_ID" not in env
    assert "IOT_MQTT_SHARE_GROUP" not in env
    assert env["IOT_HTTP_PORT"] == "9100"


def test_three_bridges_share_one_subscription_with_own_sessions_and_ports(
    tmp_path: Path,
) -> None:
    stack = _stack(tmp_path, bridges=3, bridge_http_port=19100, insecure_anonymous=True)
    names = [name for name, _ in stack.services()]
    assert names == ["mosquitto", "kafka", "bridge-1", "bridge-2", "bridge-3", "commands", "api"]
    bridges = stack.bridges()
    for i, bridge in enumerate(bridges, start=1):
        assert bridge.argv == [sys.executable, "-m", "bridge.cli"]
        assert bridge.env["IOT_MQTT_SHARE_GROUP"] == "iot-bridge"
        assert bridge.env["IOT_MQTT_CLIENT_ID"] == f"iot-bridge-{i}"
        assert bridge.env["IOT_COMMANDS_ENABLED"] == "0"  # separate: its own process
        assert bridge.process.pid_path == tmp_path / "run" / f"bridge-{i}.pid"
        assert bridge.process.log_path == tmp_path / "logs" / f"bridge-{i}.log"
    ports = [b.env["IOT_HTTP_PORT"] for b in bridges]
    assert ports == ["19100", "19110", "19120"]
    endpoints = stack.endpoints()
    assert [endpoints[f"bridge-{i}"] for i in (1, 2, 3)] == [
        f"http://127.0.0.1:{p}/metrics" for p in ports
    ]
    assert "bridge" not in endpoints


def test_each_bridge_is_supervised_and_logs_in_as_the_bridge_account(tmp_path: Path) -> None:
    stack = _stack(tmp_path, bridges=2)
    for bridge in stack.bridges():
        assert bridge.process.supervisor is stack.link is not None
        assert bridge.env["IOT_MQTT_USERNAME"] == "svc/bridge"  # not pinned to a client id
        assert bridge.env["IOT_MQTT_PASSWORD_FILE"] == str(tmp_path / "secrets" / "bridge.secret")


def test_inline_command_path_runs_in_the_first_bridge_only(tmp_path: Path) -> None:
    stack = _stack(tmp_path, bridges=3, commands_mode="inline")
    assert [b.env["IOT_COMMANDS_ENABLED"] for b in stack.bridges()] == ["1", "0", "0"]
    assert "commands" not in [name for name, _ in stack.services()]


def test_down_and_status_find_instances_an_earlier_up_started(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("bridge-1.pid", "bridge-4.pid", "bridge-x.pid", "bridge-0.pid"):
        (run / name).write_text("{}")
    names = [name for name, _ in _stack(tmp_path)._all_known()]
    assert names[:4] == ["mosquitto", "kafka", "bridge", "bridge-1"]
    assert [n for n in names if n.startswith("bridge-")] == ["bridge-1", "bridge-4"]
    # `status` wants what the last `up` recorded, whatever its own flags
    (tmp_path / "stack.json").write_text(
        json.dumps({"bridge-1": "http://a/metrics", "bridge-2": "http://b/metrics"})
    )
    wanted = [st.name for st in _stack(tmp_path, supervise=False).status()]
    assert wanted == ["mosquitto", "kafka", "bridge-1", "bridge-2"]


@pytest.mark.parametrize(
    "changes",
    [
        {"bridges": 0},
        {"bridges": 17},
        {"bridges": 2, "bridge_http_port": 9091, "commands_http_port": 9101},  # 9091 + 10
        {"bridges": 3, "analytics_http_port": 9120},
        {"bridges": 2, "bridge_http_port": 65530},
    ],
)
def test_bad_bridge_counts_and_port_clashes_are_rejected(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    with pytest.raises(StackError):
        StackConfig(data_dir=tmp_path, **changes)  # type: ignore[arg-type]


def test_flag_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_STACK_BRIDGES", "2")
    base = ["up", "--data-dir", str(tmp_path)]
    assert _config(_parser().parse_args(base)).bridges == 2
    assert _config(_parser().parse_args([*base, "--bridges", "3"])).bridges == 3


def test_the_first_bridge_watches_kafkas_log_dir_and_mosquittos_store(tmp_path: Path) -> None:
    """Kafka exits on a full log dir and Mosquitto's saves fail on a full store: the first
    bridge exports their free space (store_dirs; docs/operations.md, "A full disk")."""
    one = _stack(tmp_path, bridges=2).bridges()
    assert one[0].env["IOT_STORE_DIRS"] == (
        f"kafka={tmp_path / 'kafka' / 'data'},mosquitto={tmp_path / 'mosquitto'}"
    )
    assert "IOT_STORE_DIRS" not in one[1].env  # one bridge exports them, not each
    shards = _stack(tmp_path, kafka_nodes=3, mqtt_shards=2, mqtt_tls=False)
    cluster = shards.bridges()[0].env["IOT_STORE_DIRS"]
    assert cluster.split(",") == [
        *(f"kafka-{i}={tmp_path / 'kafka' / f'node-{i}' / 'data'}" for i in (1, 2, 3)),
        *(f"mosquitto{s}={tmp_path / f'mosquitto{s}'}" for s in ("", "-2")),
    ]


def test_status_warns_of_a_full_data_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka, mosquitto = tmp_path / "kafka" / "data", tmp_path / "mosquitto"
    sizes = {str(kafka): (0, 1 << 30), str(mosquitto): (1 << 30, 1 << 31)}  # free, size

    class Stat:
        def __init__(self, free: int, size: int) -> None:
            self.f_bavail, self.f_blocks, self.f_frsize = free // 4096, size // 4096, 4096

    monkeypatch.setattr("stack.app_services.os.statvfs", lambda p: Stat(*sizes[str(p)]))
    assert _stack(tmp_path).full_stores() == [f"kafka: disk full ({kafka}: 0 bytes free)"]
