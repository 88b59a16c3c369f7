"""docker-compose.shards.yml (issue 36 item 1: the sharded MQTT tier of `iot-stack up
--mqtt-shards 2` as a compose overlay) checked against the launcher and the Compose schema; no
engine runs here (tests/test_compose_run.py runs it for real)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack.config import StackConfig
from tests.test_compose import (
    COMPOSE,
    ROOT,
    SCRIPTS,
    SERVICES,
    _env,
    _env_names_read,
    _mounts,
    _spec_errors,
)

SHARDS_FILE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.shards.yml").read_text())
OVERLAY: dict[str, dict[str, Any]] = SHARDS_FILE["services"]
SHARD_HOSTS = "mqtt-shard-1:1883,mqtt-shard-2:1883"
# read by `iot-devices`, which an operator runs in the front's container (`docker compose exec
# mosquitto iot-devices ...`), not by the front's own `iot-stack serve mqtt-front`
FRONT_EXTRA_ENV = {"IOT_REGISTRY_MQTT_SHARD_PORTS"}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """One service as Compose merges an override into it: mappings key by key, volumes by
    their container path, anything else replaced."""
    merged = dict(base)
    for key, value in override.items():
        if key == "volumes" and key in base:
            mounts = {spec.split(":")[1]: spec for spec in [*base[key], *value]}
            merged[key] = list(mounts.values())
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = {**base[key], **value}
        else:
            merged[key] = value
    return merged


MERGED = {name: _merge(SERVICES.get(name, {}), OVERLAY.get(name, {}))
          for name in {*SERVICES, *OVERLAY}}  # fmt: skip
SHARDS = ["mqtt-shard-1", "mqtt-shard-2"]


def _flag(name: str, flag: str) -> str:
    command = MERGED[name]["command"]
    return command[command.index(flag) + 1]


def test_the_overlay_and_the_merged_stack_are_valid_compose() -> None:
    assert _spec_errors(SHARDS_FILE) == []
    merged = {**COMPOSE, "services": MERGED,
              "volumes": {**COMPOSE["volumes"], **SHARDS_FILE["volumes"]}}  # fmt: skip
    assert _spec_errors(merged) == []


@pytest.mark.parametrize("name", sorted(OVERLAY))
def test_commands_parse_and_their_environment_is_read(name: str) -> None:
    service = MERGED[name]
    read = _env_names_read(service["command"][0]) | (
        FRONT_EXTRA_ENV if name == "mosquitto" else set()
    )
    assert not sorted(set(_env(service)) - read), name
    if "build" in OVERLAY[name]:  # a whole new service: the one image
        assert service["image"] == SERVICES["mosquitto"]["image"]
    module, func = SCRIPTS[service["command"][0]].split(":")
    code = f"import sys; from {module} import {func}; sys.exit({func}(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, *service["command"][1:], "--help"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, f"{name}: {service['command']} does not parse:\n{result.stderr}"


def test_the_front_is_haproxy_on_the_single_mosquittos_ports_before_every_shard() -> None:
    front = MERGED["mosquitto"]
    assert front["command"][:3] == ["iot-stack", "serve", "mqtt-front"]
    assert front["ports"] == SERVICES["mosquitto"]["ports"] == ["1883:1883", "8883:8883"]
    assert (_flag("mosquitto", "--mqtt-port"), _flag("mosquitto", "--mqtt-tls-port")) == (
        "1883",
        "8883",
    )
    assert _flag("mosquitto", "--mqtt-shard-hosts") == SHARD_HOSTS
    assert SHARD_HOSTS.split(",") == [f"{s}:{_flag(s, '--mqtt-port')}" for s in SHARDS]
    for index, shard in enumerate(SHARDS, start=1):
        service = MERGED[shard]
        assert service["command"][:3] == ["iot-stack", "serve", "mosquitto"]
        assert _flag(shard, "--mqtt-shard") == str(index)
        assert "ports" not in service  # devices reach a shard through the front only
        assert front["depends_on"][shard] == {"condition": "service_healthy"}
        assert "healthcheck" in service
        mounts = _mounts(service)
        assert mounts["/data"] == f"{shard}-data"  # its own Mosquitto store and dynsec file
        assert mounts["/secrets"] == "secrets"
        assert _env(service)["IOT_STACK_SECRETS_DIR"] == "/secrets"
    # the TLS front's unix sockets: one volume, where each shard's front_socket() lies
    assert {_mounts(MERGED[s])["/data/mqtt-front"] for s in ["mosquitto", *SHARDS]} == {
        "mqtt-front"
    }
    # shard 1 writes the registry admin's secret first; the front makes the CA Kafka needs
    assert MERGED["mqtt-shard-2"]["depends_on"] == {
        "mqtt-shard-1": {"condition": "service_healthy"}
    }
    assert MERGED["kafka"]["depends_on"]["mosquitto"] == {"condition": "service_healthy"}
    assert _env(MERGED["mosquitto"])["IOT_REGISTRY_CA_DIR"] == "/ca"


def test_each_shard_has_the_bridge_and_command_path_the_launcher_gives_it(
    tmp_path: Path,
) -> None:
    from stack.launcher import Stack

    stack = Stack(StackConfig(data_dir=tmp_path, mqtt_shards=2, bind_host="127.0.0.1"))
    same = ("IOT_MQTT_CLIENT_ID", "IOT_COMMANDS_ENABLED", "IOT_MQTT_USERNAME", "IOT_REGISTRY_TOPIC")
    for index, (bridge, commands) in enumerate(
        [("bridge", "commands"), ("bridge-2", "commands-2")], start=1
    ):
        shard = f"mqtt-shard-{index}"
        launched = stack.bridge(index).env
        env = _env(MERGED[bridge])
        assert (env["IOT_MQTT_HOST"], env["IOT_MQTT_PORT"]) == (shard, "1883"), bridge
        assert "IOT_MQTT_SHARE_GROUP" not in env  # one subscription per shard: order kept
        assert {k: env.get(k) for k in same} == {k: launched.get(k) for k in same}, bridge
        launched = stack.commands(index).env
        env = _env(MERGED[commands])
        assert (env["IOT_MQTT_HOST"], env["IOT_MQTT_PORT"]) == (shard, "1883"), commands
        keys = [k for k in launched if k.startswith("IOT_COMMAND_") and "HTTP" not in k]
        assert keys, "the launcher's shard settings of the command path"
        assert {k: env.get(k) for k in keys} == {k: launched[k] for k in keys}, commands
        for name in (bridge, commands):
            assert MERGED[name]["depends_on"][shard] == {"condition": "service_healthy"}, name
            assert "healthcheck" in MERGED[name], name
    # shard 1's refused log-ins, from its own volume (one bridge exports them, as with `up`)
    metrics = _env(MERGED["bridge"])["IOT_MQTT_AUTH_METRICS_FILE"]
    assert metrics == "/mosquitto-data/mosquitto/auth_metrics.json"
    assert _mounts(MERGED["bridge"])["/mosquitto-data"] == "mqtt-shard-1-data:ro"
    assert "IOT_MQTT_AUTH_METRICS_FILE" not in _env(MERGED["bridge-2"])
    services = _env(MERGED["api"])["IOT_CONSOLE_SERVICES"]
    for name in ("bridge", "bridge-2", "commands", "commands-2"):
        assert f"{name}=http://{name}:" in services


def test_the_registry_changes_every_shard_and_every_device_dials_the_front() -> None:
    assert _flag("auth-init", "--mqtt-shard-hosts") == SHARD_HOSTS
    api = _env(MERGED["api"])
    assert (
        api["IOT_REGISTRY_MQTT_SHARD_PORTS"] == api["IOT_CONSOLE_MQTT_SHARD_PORTS"] == SHARD_HOSTS
    )
    assert _env(MERGED["mosquitto"])["IOT_REGISTRY_MQTT_SHARD_PORTS"] == SHARD_HOSTS
    for shard in SHARDS:
        assert MERGED["auth-init"]["depends_on"][shard] == {"condition": "service_healthy"}
    per_shard = {"bridge", "bridge-2", "commands", "commands-2"}
    for name, service in MERGED.items():
        env = _env(service)
        if "IOT_MQTT_HOST" in env and name not in per_shard:  # devices' sessions, sims
            assert env["IOT_MQTT_HOST"] == "mosquitto", name


def test_the_image_has_haproxy_and_the_front_socket_directory() -> None:
    from tests.test_compose import _final_stage

    dockerfile = (ROOT / "Dockerfile").read_text()
    final = _final_stage(dockerfile)
    assert re.search(r"apt-get install[^&]* haproxy ", final)
    assert "chown iot:iot /data /data/mqtt-front" in final  # the volume takes its owner and mode
    assert "chmod 0700 /data/mqtt-front" in final
    assert "iot_auth_metrics iot_front_auth" in dockerfile  # both plugins built
