"""What `up` starts for each command-path mode (no process is started here)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from stack.config import StackConfig
from stack.errors import StackError
from stack.launcher import Stack
from stack.process import ManagedProcess


def _stack(tmp_path: Path, **changes: object) -> Stack:
    return Stack(StackConfig(data_dir=tmp_path, **changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "names", "inline"),
    [
        ("separate", ["mosquitto", "kafka", "bridge", "commands", "api"], "0"),
        ("inline", ["mosquitto", "kafka", "bridge", "api"], "1"),
        ("off", ["mosquitto", "kafka", "bridge", "api"], "0"),
    ],
)
def test_services_per_commands_mode(
    tmp_path: Path, mode: str, names: list[str], inline: str
) -> None:
    stack = _stack(tmp_path, commands_mode=mode)
    assert [name for name, _ in stack.services()] == names
    assert stack.bridge().env["IOT_COMMANDS_ENABLED"] == inline
    # inline: `iot-bridge`'s module, which runs the command path (the bridge does not import it)
    module = "commands.inline" if inline == "1" else "bridge.cli"
    assert stack.bridge().argv == [sys.executable, "-m", module]


def test_the_bridge_reads_tenant_quotas_from_the_registry_when_authentication_is_on(
    tmp_path: Path,
) -> None:
    assert _stack(tmp_path).bridge().env["IOT_REGISTRY_TOPIC"] == "iot.registry"
    open_broker = _stack(tmp_path, insecure_anonymous=True).bridge().env
    assert "IOT_REGISTRY_TOPIC" not in open_broker


def test_no_bridge_means_no_command_path(tmp_path: Path) -> None:
    stack = _stack(tmp_path, with_bridge=False)
    assert [name for name, _ in stack.services()] == ["mosquitto", "kafka", "api"]
    stack = _stack(tmp_path, with_bridge=False, with_api=False)
    assert [name for name, _ in stack.services()] == ["mosquitto", "kafka"]


def test_the_commands_process_is_iot_cmd_serve_on_its_own_port(tmp_path: Path) -> None:
    stack = _stack(
        tmp_path,
        mqtt_port=11883,
        kafka_port=19092,
        commands_http_port=19101,
        commands_mode="separate",
        insecure_anonymous=True,  # no login (the default's login: the test below)
    )
    commands = stack.commands()
    assert commands.argv == [sys.executable, "-m", "commands.cli", "serve"]
    assert commands.env == {
        "IOT_MQTT_HOST": "127.0.0.1",
        "IOT_MQTT_PORT": "11883",
        "IOT_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "IOT_LOG_FORMAT": "json",
        "IOT_HTTP_HOST": "127.0.0.1",
        "IOT_COMMAND_HTTP_PORT": "19101",
    }
    assert commands.endpoint == "http://127.0.0.1:19101/metrics"
    assert stack.endpoints()["commands"] == "http://127.0.0.1:19101/metrics"


def test_services_log_in_with_a_password_file_and_devices_with_theirs(tmp_path: Path) -> None:
    stack = _stack(tmp_path, devices=3)
    secrets = tmp_path / "secrets"
    for name in ("bridge", "commands"):
        env = getattr(stack, name)().env
        assert env["IOT_MQTT_USERNAME"] == f"svc/{name}"
        assert env["IOT_MQTT_PASSWORD_FILE"] == str(secrets / f"{name}.secret")
        assert "IOT_MQTT_PASSWORD" not in env  # the secret is not in the environment
    argv = stack.devices().argv
    assert argv[argv.index("--credentials") + 1] == str(secrets / "devices.json")
    assert stack.device_ids() == ["dev-00000", "dev-00001", "dev-00002"]
    assert stack.endpoints()["mqtt_auth"].startswith("registry credentials")


def test_insecure_anonymous_gives_no_logins_and_says_so(tmp_path: Path) -> None:
    stack = _stack(tmp_path, devices=2, insecure_anonymous=True)
    assert "IOT_MQTT_USERNAME" not in stack.bridge().env
    assert "--credentials" not in stack.devices().argv
    assert stack.endpoints()["mqtt_auth"].startswith("ANONYMOUS")


def test_status_wants_what_the_last_up_started(tmp_path: Path) -> None:
    # nothing runs; before any `up` the config says what is expected
    names = [st.name for st in _stack(tmp_path, commands_mode="separate").status()]
    assert names == ["mosquitto", "kafka", "bridge", "commands", "api"]
    # an `up --commands-mode inline` recorded no `commands`: a later plain `status` does not
    # report a missing process that was never meant to run
    (tmp_path / "stack.json").write_text(
        json.dumps({"mqtt": "x", "kafka": "y", "bridge": "http://127.0.0.1:9100/metrics"})
    )
    names = [st.name for st in _stack(tmp_path, commands_mode="separate").status()]
    assert names == ["mosquitto", "kafka", "bridge"]


def test_an_external_kafka_starts_no_broker_and_every_client_gets_it(tmp_path: Path) -> None:
    stack = _stack(tmp_path, external_kafka="k1:9092,k2:9092,k3:9092", insecure_anonymous=True)
    assert [name for name, _ in stack.services()] == ["mosquitto", "bridge", "commands", "api"]
    assert stack.bridge().env["IOT_KAFKA_BOOTSTRAP"] == "k1:9092,k2:9092,k3:9092"
    assert stack.commands().env["IOT_KAFKA_BOOTSTRAP"] == "k1:9092,k2:9092,k3:9092"
    assert stack.analytics().env["IOT_KAFKA_BOOTSTRAP"] == "k1:9092,k2:9092,k3:9092"
    endpoints = stack.endpoints()
    assert (endpoints["kafka"], endpoints["kafka_nodes"]) == ("k1:9092,k2:9092,k3:9092", "external")
    assert endpoints["bridge"] == "http://127.0.0.1:9100/metrics"


def test_a_cluster_is_one_service_to_start_and_a_row_per_node_in_status(tmp_path: Path) -> None:
    stack = _stack(tmp_path, kafka_nodes=3, kafka_port=19092, with_bridge=False, with_api=False)
    assert [name for name, _ in stack.services()] == ["mosquitto", "kafka"]
    assert [n.name for n in stack.kafka_nodes] == ["kafka-1", "kafka-2", "kafka-3"]
    assert [st.name for st in stack.status()] == ["mosquitto", "kafka-1", "kafka-2", "kafka-3"]
    assert stack.endpoints()["kafka_nodes"] == "3"
    assert stack.bridge().env["IOT_KAFKA_BOOTSTRAP"] == (
        "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
    )


def test_down_and_status_find_the_cluster_a_plain_config_does_not_name(tmp_path: Path) -> None:
    # `up --kafka-nodes 3` recorded its cluster; `down`/`status` without the flag still see it
    (tmp_path / "stack.json").write_text(json.dumps({"kafka": "a:1,b:2,c:3", "kafka_nodes": "3"}))
    stack = _stack(tmp_path, with_bridge=False)
    known = dict(stack._all_known())
    assert [n.name for n in known["kafka"].nodes] == ["kafka-1", "kafka-2", "kafka-3"]  # type: ignore[attr-defined]
    assert stack.recorded_kafka_nodes() == "3"


def test_down_stops_a_cluster_with_a_node_already_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stack.kafka_server import KafkaCluster

    stack = _stack(tmp_path, kafka_nodes=3, kafka_port=19092, with_bridge=False, with_api=False)
    cluster = stack.kafka
    assert isinstance(cluster, KafkaCluster)
    alive = {"kafka-2", "kafka-3"}  # kafka-1 was killed and not restarted
    stopped: list[str] = []
    for node in cluster.nodes:
        monkeypatch.setattr(node, "running", lambda n=node.name: n in alive)
        monkeypatch.setattr(node, "stop", lambda timeout=0.0, n=node.name: stopped.append(n))
    assert not cluster.running()
    stack.down(progress=lambda _msg: None)
    assert sorted(stopped) == ["kafka-1", "kafka-2", "kafka-3"]


def test_status_after_an_external_kafka_up_misses_no_broker(tmp_path: Path) -> None:
    # `up --kafka-bootstrap` recorded it; a plain `status` (no flag, no env) must not want one
    (tmp_path / "stack.json").write_text(
        json.dumps({"mqtt": "x", "kafka": "k1:9092,k2:9092", "kafka_nodes": "external"})
    )
    names = [st.name for st in _stack(tmp_path, with_bridge=False).status()]
    assert names == ["mosquitto"]


def test_iot_api_uses_registry_auth_unless_the_stack_is_anonymous(tmp_path: Path) -> None:
    stack = _stack(tmp_path, kafka_port=19092, api_port=13904)
    api = stack.api()
    assert api.argv == [sys.executable, "-m", "api"]
    assert api.env == {
        "IOT_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "IOT_API_HOST": "127.0.0.1",
        "IOT_API_PORT": "13904",
        "IOT_REGISTRY_AUTH": "1",
        "IOT_REGISTRY_MQTT_HOST": "127.0.0.1",
        "IOT_REGISTRY_MQTT_PORT": str(stack.config.mqtt_port),
        "IOT_MQTT_HOST": "127.0.0.1",
        "IOT_MQTT_PORT": str(stack.config.mqtt_port),
        "IOT_REGISTRY_ADMIN_PASSWORD_FILE": str(tmp_path / "secrets/registry-admin.secret"),
        # HTTP devices' commands: iot-api's MQTT sessions log in as the `api` service account
        "IOT_MQTT_USERNAME": "svc/api",
        "IOT_MQTT_PASSWORD_FILE": str(tmp_path / "secrets/api.secret"),
    }
    assert stack.endpoints()["api"] == "http://127.0.0.1:13904"
    anonymous = _stack(tmp_path, insecure_anonymous=True).api().env
    assert anonymous["IOT_INSECURE_ANONYMOUS"] == "1"
    assert "IOT_REGISTRY_AUTH" not in anonymous
    assert "IOT_REGISTRY_ADMIN_PASSWORD_FILE" not in anonymous  # no admin client to log in as
    assert "IOT_MQTT_USERNAME" not in anonymous


def test_iot_api_tls_port_serves_the_appliance_cas_certificate(tmp_path: Path) -> None:
    env = _stack(tmp_path, api_tls_port=13905).api().env
    assert env["IOT_TLS_PORT"] == "13905"
    assert env["IOT_TLS_CA_DIR"] == str(tmp_path / "ca")  # iot-devices --ca-dir <data-dir>/ca
    assert "IOT_TLS_PORT" not in _stack(tmp_path).api().env  # off by default


def test_the_console_gets_the_stack_endpoints_and_the_admin_password_file(
    tmp_path: Path,
) -> None:
    stack = _stack(
        tmp_path,
        api_console=True,
        mqtt_port=11883,
        bridge_http_port=19100,
        analytics_http_port=19102,
    )
    env = stack.api().env
    assert env["IOT_CONSOLE"] == "1"
    assert env["IOT_CONSOLE_MQTT_PORT"] == "11883"
    assert env["IOT_CONSOLE_ADMIN_PASSWORD_FILE"] == str(tmp_path / "secrets/registry-admin.secret")
    assert "bridge=http://127.0.0.1:19100," in env["IOT_CONSOLE_SERVICES"]
    assert env["IOT_CONSOLE_SERVICES"].endswith("analytics=http://127.0.0.1:19102")
    assert env["IOT_CONSOLE_WAREHOUSE"] == str(tmp_path / "warehouse")
    assert env["IOT_CONSOLE_SITES_PASSWORD_FILE"] == str(tmp_path / "secrets/bridge.secret")
    # --amqp: the Overview watches iot-amqp too (its /healthz and /metrics)
    amqp = _stack(tmp_path, api_console=True, with_amqp=True, amqp_http_port=19106).api().env
    assert amqp["IOT_CONSOLE_SERVICES"].endswith(",amqp=http://127.0.0.1:19106")
    # --bridges 3: the console watches (and adds up) every instance
    three = _stack(tmp_path, api_console=True, bridges=3, bridge_http_port=19100).api().env
    assert three["IOT_CONSOLE_SERVICES"].startswith(
        "bridge-1=http://127.0.0.1:19100,bridge-2=http://127.0.0.1:19110,"
        "bridge-3=http://127.0.0.1:19120,commands="
    )
    # --mqtt-shards 2: each shard's bridge and command path
    shards = (
        _stack(tmp_path, api_console=True, mqtt_shards=2, mqtt_tls=False, bridge_http_port=19100)
        .api()
        .env["IOT_CONSOLE_SERVICES"]
    )
    assert "bridge-1=http://127.0.0.1:19100,bridge-2=http://127.0.0.1:19110," in shards
    assert ",commands-1=http://127.0.0.1:9101,commands-2=http://127.0.0.1:9111," in shards
    # anonymous Mosquitto: no admin client to log in as
    anonymous = _stack(tmp_path, api_console=True, insecure_anonymous=True).api().env
    assert "IOT_CONSOLE_ADMIN_PASSWORD_FILE" not in anonymous
    assert "IOT_CONSOLE" not in _stack(tmp_path).api().env


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.mark.parametrize("supervised", [True, False])
def test_up_stops_what_a_dead_supervisor_left_before_it_starts_again(
    tmp_path: Path, supervised: bool
) -> None:
    """Services of a supervised `up` whose supervisor is gone are stopped (newest first) before
    a new supervisor starts; an unsupervised `up`'s servers (test stacks) are left alone."""
    stack = _stack(tmp_path)
    recorded = {"mqtt": "mqtt://127.0.0.1:1883"} | ({"supervisor": "x"} if supervised else {})
    (tmp_path / "stack.json").write_text(json.dumps(recorded))
    left = [stack.bridge(), stack.api()]
    # started as a dead supervisor's children would be: pid files under the stack's run dir
    pids = [
        ManagedProcess(s.process.name, stack.config.run_dir, s.process.log_path).start(SLEEPER)
        for s in left
    ]
    said: list[str] = []
    try:
        stopped = stack._stop_leftovers(said.append)
        if supervised:
            assert stopped == ["api", "bridge"]  # newest first, as `down`
            assert said[0] == "api runs without its supervisor: stopping it first ..."
            assert [service.process.pid() for service in left] == [None, None]
            for pid in pids:  # signalled and gone from the pid files; its exit takes a moment
                deadline = time.monotonic() + 5
                while _state(pid) not in {"Z", "X"} and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _state(pid) in {"Z", "X"}
        else:
            assert stopped == []
            assert [service.process.pid() for service in left] == pids
    finally:
        for service in left:
            ManagedProcess(service.process.name, stack.config.run_dir, tmp_path / "x").stop(5)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def test_iot_amqp_is_started_with_amqp_and_logs_devices_in_against_the_registry(
    tmp_path: Path,
) -> None:
    assert "amqp" not in [name for name, _ in _stack(tmp_path).services()]  # opt-in
    stack = _stack(tmp_path, kafka_port=19092, with_amqp=True, amqp_port=15672)
    assert [name for name, _ in stack.services()][-1] == "amqp"
    amqp = stack.amqp()
    assert amqp.argv == [sys.executable, "-m", "amqp"]
    assert amqp.env == {
        "IOT_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "IOT_AMQP_HOST": "127.0.0.1",
        "IOT_AMQP_PORT": "15672",
        "IOT_HTTP_HOST": "127.0.0.1",
        "IOT_HTTP_PORT": "9106",
        "IOT_REGISTRY_AUTH": "1",
        # devices' commands: a persistent MQTT session per device, as svc/api (as iot-api)
        "IOT_MQTT_HOST": "127.0.0.1",
        "IOT_MQTT_PORT": "1883",
        "IOT_MQTT_USERNAME": "svc/api",
        "IOT_MQTT_PASSWORD_FILE": str(tmp_path / "secrets" / "api.secret"),
        # amqps on by default, with the CA Mosquitto's 8883 uses (`iot-devices cert` issues)
        "IOT_AMQPS_PORT": "5671",
        "IOT_TLS_CA_DIR": str((tmp_path / "ca").resolve()),
    }
    assert stack.endpoints()["amqp"] == (
        "amqp://127.0.0.1:15672, amqps://127.0.0.1:5671 (PLAIN or EXTERNAL) "
        "(metrics http://127.0.0.1:9106/metrics)"
    )
    anonymous = _stack(tmp_path, insecure_anonymous=True).amqp().env
    assert anonymous["IOT_INSECURE_ANONYMOUS"] == "1"
    assert "IOT_REGISTRY_AUTH" not in anonymous
    assert anonymous["IOT_AMQPS_PORT"] == "0"  # no identities a certificate could stand for
    off = _stack(tmp_path, with_amqp=True, amqp_tls=False).amqp().env
    assert off["IOT_AMQPS_PORT"] == "0"
    with pytest.raises(StackError, match="amqp_tls_port"):
        _stack(tmp_path, with_amqp=True, amqp_tls_port=5672)


def test_status_lists_every_recorded_shard_even_one_with_no_pid_file(tmp_path: Path) -> None:
    # a shard the supervisor is restarting after a kill -9 has no pid file for a moment:
    # `status` (no --mqtt-shards) still lists it, as not running, from what `up` recorded
    (tmp_path / "stack.json").write_text(
        json.dumps({"mqtt": "x", "kafka": "y", "mqtt_shards": "2"})
    )
    stack = _stack(tmp_path, with_bridge=False, with_api=False)
    names = [st.name for st in stack.status()]
    assert names[:3] == ["mosquitto", "mosquitto-2", "haproxy"], names
    assert [name for name, _ in stack.mqtt_tier_known()] == ["mosquitto", "mosquitto-2", "haproxy"]
