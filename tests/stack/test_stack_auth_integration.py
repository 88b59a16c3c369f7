"""Authentication on by default (issue 13, deliverable 2): the real `iot-stack up` CLI.

`up --devices 3` provisions the simulator's devices through the registry; each logs in with its
own secret and its telemetry reaches iot.telemetry. Anonymous and wrong-password CONNECTs are
refused with MQTT 5 reason codes; `down`/`up` reuses the accounts and secrets; a device disabled
with `iot-devices` is dropped and refused while the others keep flowing.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from stack import paths
from tests.bridge.helpers import wait_for
from tests.plugins.jvm_options import environ_without_settings
from tests.registry.mqtt_probe import connack_of
from tests.stack.stack_ports import StackPorts

pytestmark = pytest.mark.integration

DEVICES = ["dev-00000", "dev-00001", "dev-00002"]
REFUSED = {0x86, 0x87}  # Bad user name or password / Not authorized (dynsec answers 0x87)


def _run(
    module: str, args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip


def _end_offsets(bootstrap: str, topic: str = "iot.telemetry") -> list[TopicPartition]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = []
        for p in sorted(meta.partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends.append(TopicPartition(topic, p, high))
        return ends
    finally:
        consumer.close()


def _keys_since(
    bootstrap: str, start: list[TopicPartition], enough: dict[str, int], timeout: float = 90
) -> dict[str, int]:
    """Telemetry record counts per key from ``start`` until each key of ``enough`` has its
    count (or the timeout)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign(start)
    counts: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if all(counts.get(k, 0) >= n for k, n in enough.items()):
                break
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            key = (msg.key() or b"").decode()
            counts[key] = counts.get(key, 0) + 1
    finally:
        consumer.close()
    return counts


def _pid_of(status: str, name: str) -> int:
    [line] = [ln for ln in status.splitlines() if ln.startswith(name)]
    return int(line.split("pid ")[1].split(")")[0])


def _auth_failures(port: int) -> dict[str, int]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = re.findall(r'^iot_mqtt_auth_failures_total\{tenant="([^"]+)"\} ([0-9.]+)$', text, re.M)
    return {tenant: int(float(n)) for tenant, n in found}


def test_up_authenticates_every_client_and_keeps_its_accounts(tmp_path: Path) -> None:
    ports = StackPorts.free(tmp_path)
    args = ports.args
    secrets = ports.data_dir / "secrets"
    up_args = ["up", *args, "--partitions", "3", "--devices", "3", "--device-rate", "4"]
    env = environ_without_settings()
    env |= {"IOT_KAFKA_HEAP": "512m", "IOT_START_TIMEOUT": "180"}
    bootstrap = ports.bootstrap
    registry = [
        "--kafka-bootstrap", bootstrap, "--mqtt-host", "127.0.0.1", "--mqtt-port", str(ports.mqtt),
        "--admin-password-file", str(secrets / "registry-admin.secret"), "--json",
    ]  # fmt: skip
    start = time.monotonic()
    try:  # `down` also after an `up` that timed out: it left the stack running
        up = _run("stack.cli", up_args, env)
        assert up.returncode == 0, up.stderr
        print(f"first up with 3 devices provisioned: {time.monotonic() - start:.1f} s")
        assert "WARNING" not in up.stderr
        assert "devices provisioned: 3 added" in up.stderr
        assert "mqtt_auth" in up.stdout
        assert "registry credentials" in up.stdout

        # secrets: 0600 files; the bridge got a password *file*, not the secret, in its env
        names = ["api.secret", "bridge.secret", "commands.secret", "devices.json"]
        names.append("registry-admin.secret")
        assert sorted(p.name for p in secrets.iterdir()) == names
        for path in secrets.iterdir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        creds = json.loads((secrets / "devices.json").read_text())
        assert sorted(creds) == DEVICES
        snapshot = {p.name: p.read_text() for p in secrets.iterdir()}
        status = _run("stack.cli", ["status", *args], env)
        assert status.returncode == 0, status.stdout
        assert "WARNING" not in status.stderr
        bridge_env = Path(f"/proc/{_pid_of(status.stdout, 'bridge')}/environ").read_bytes()
        assert b"IOT_MQTT_USERNAME=svc/bridge" in bridge_env
        assert f"IOT_MQTT_PASSWORD_FILE={secrets / 'bridge.secret'}".encode() in bridge_env
        assert snapshot["bridge.secret"].strip().encode() not in bridge_env

        # each device's telemetry reaches Kafka: they logged in with their own secrets
        begin = [TopicPartition("iot.telemetry", p, 0) for p in range(3)]
        got = _keys_since(bootstrap, begin, dict.fromkeys(DEVICES, 3))
        assert all(got.get(d, 0) >= 3 for d in DEVICES), got

        # anonymous, wrong secret, unknown user: refused at CONNECT with the MQTT 5 code
        assert connack_of(ports.mqtt, None, None).value in REFUSED
        assert connack_of(ports.mqtt, "dev-00000", "not-the-secret", "probe-wrong").value in REFUSED
        assert connack_of(ports.mqtt, "dev-00000", "not-the-secret").value in REFUSED
        assert connack_of(ports.mqtt, "dev-99999", creds["dev-00000"]).value in REFUSED
        assert connack_of(ports.mqtt, "svc/bridge", "nope", "probe-svc").value in REFUSED
        if paths.auth_metrics_plugin().exists():
            # Mosquitto's metrics plugin counted them; the bridge exports them per tenant
            # (dev-99999 names the default tenant, the anonymous one no tenant: unknown)
            want = {"default": 3, "svc": 1, "unknown": 1}
            wait_for(
                lambda: _auth_failures(ports.bridge_http) == want,
                20,
                f"refused log-ins {want} on the bridge's /metrics",
            )

        # down, up: the same accounts and secrets, nothing added twice, devices flow again
        down = _run("stack.cli", ["down", *args], env)
        assert down.returncode == 0, down.stderr
        up2 = _run("stack.cli", up_args, env)
        assert up2.returncode == 0, up2.stderr
        ends = _end_offsets(bootstrap)  # from here on: what the devices send after `up`
        assert "devices provisioned" not in up2.stderr
        assert "service accounts ready" not in up2.stderr
        assert {p.name: p.read_text() for p in secrets.iterdir()} == snapshot
        listed = _run("registry", [*registry, "device", "list"], env)
        assert listed.returncode == 0, listed.stderr
        assert sorted(d["id"] for d in json.loads(listed.stdout)) == DEVICES
        accounts = _run("registry", [*registry, "account", "list"], env)
        names = sorted(a["name"] for a in json.loads(accounts.stdout))
        assert names == ["api", "bridge", "commands"]
        got = _keys_since(bootstrap, ends, dict.fromkeys(DEVICES, 3))
        assert all(got.get(d, 0) >= 3 for d in DEVICES), got

        # `iot-stack provision` (docker-compose's auth-init) adds only what is missing
        more = _run(
            "stack.cli", ["provision", *args, "--kafka-bootstrap", bootstrap, "--devices", "4"], env
        )
        assert more.returncode == 0, more.stderr
        assert "devices provisioned: 1 added, 0 re-keyed" in more.stderr
        creds4 = json.loads((secrets / "devices.json").read_text())
        assert creds4 == creds | {"dev-00003": creds4["dev-00003"]}
        assert connack_of(ports.mqtt, "dev-00003", creds4["dev-00003"]).value == 0

        # a device disabled through the registry is dropped at once and refused after;
        # the other devices (and the bridge) keep going
        disabled = _run("registry", [*registry, "device", "disable", "dev-00001"], env)
        assert disabled.returncode == 0, disabled.stderr
        assert json.loads(disabled.stdout)["disabled"] is True
        time.sleep(2)  # what dev-00001 published before it was dropped may still be in flight
        after = _end_offsets(bootstrap)
        got = _keys_since(bootstrap, after, {"dev-00000": 8, "dev-00002": 8})
        assert got.get("dev-00000", 0) >= 8, got
        assert got.get("dev-00002", 0) >= 8, got
        assert "dev-00001" not in got, got
        assert connack_of(ports.mqtt, "dev-00001", creds["dev-00001"]).value in REFUSED

        # a secret lost from the file is re-issued (rotated: the registry keeps only hashes)
        kept = json.loads((secrets / "devices.json").read_text())
        old_secret = kept.pop("dev-00002")
        (secrets / "devices.json").write_text(json.dumps(kept))
        again = _run(
            "stack.cli", ["provision", *args, "--kafka-bootstrap", bootstrap, "--devices", "4"], env
        )
        assert again.returncode == 0, again.stderr
        assert "devices provisioned: 0 added, 1 re-keyed" in again.stderr
        new_secret = json.loads((secrets / "devices.json").read_text())["dev-00002"]
        assert new_secret != old_secret
        assert connack_of(ports.mqtt, "dev-00002", old_secret).value in REFUSED
        assert connack_of(ports.mqtt, "dev-00002", new_secret).value == 0
    finally:
        _run("stack.cli", ["down", *args], env)
