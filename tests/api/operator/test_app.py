"""Commands and devices over HTTP (/ops) against the real stack: `iot-stack up` (Mosquitto with
dynamic security, Kafka, bridge, command path, registry auth) on free ports and `iot-api` beside
it over real sockets; api keys of two tenants and several roles; an MQTT device provisioned over
HTTP answering commands sent over HTTP."""

from __future__ import annotations

import http.client
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from api.service import ApiService
from tests.api.harness import Client, Reply, basic, read_topic, run_module, running_api
from tests.plugins.jvm_options import environ_without_settings
from tests.registry.mqtt_probe import Probe, wait_for
from tests.stack.stack_ports import StackPorts

pytestmark = pytest.mark.integration


@dataclass
class Ops:
    service: ApiService
    bootstrap: str
    mqtt_port: int
    root: Client
    keys: dict[str, Client] = field(default_factory=dict)  # "<tenant>-<role>" -> client

    def call(self, who: str, method: str, path: str, body: Any = None) -> Reply:
        client = self.root if who == "root" else self.keys[who]
        data = json.dumps(body) if body is not None else None
        return client.request(method, path, data, "application/json" if data else None)


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    # every port the stack would open, the TLS listener's too (its default 8883 is one per
    # machine: two runs at once would fight for it)
    ports = StackPorts.free(tmp_path_factory.mktemp("ops"))
    data_dir, mqtt, kafka, args = ports.data_dir, ports.mqtt, ports.kafka, ports.args
    secrets = data_dir / "secrets"
    env = environ_without_settings()
    env |= {"IOT_KAFKA_HEAP": "512m", "IOT_START_TIMEOUT": "180"}
    bootstrap = f"127.0.0.1:{kafka}"
    try:
        run_module("stack.cli", ["up", *args, "--partitions", "3", "--no-api"], env)
        registry = [
            "--kafka-bootstrap", bootstrap, "--mqtt-host", "127.0.0.1", "--mqtt-port", str(mqtt),
            "--admin-password-file", str(secrets / "registry-admin.secret"), "--json",
        ]  # fmt: skip
        create = ["account", "create", "root", "--role", "admin"]
        out = run_module("registry", [*registry, *create], env)
        root_secret = json.loads(out)["secret"]
        with running_api(
            kafka_bootstrap=bootstrap, registry_auth=True, max_sse_streams=2,
            registry_mqtt_port=mqtt,
            registry_admin_password_file=str(secrets / "registry-admin.secret"),
        ) as service:  # fmt: skip
            found = Ops(service, bootstrap, mqtt, Client(service.port, basic("root", root_secret)))
            for tenant in ("acme", "beta"):
                assert found.call("root", "POST", "/ops/tenants", {"id": tenant}).status == 201
            for tenant, role in [("acme", "api"), ("acme", "viewer"), ("acme", "tenant-admin"),
                                 ("beta", "api")]:  # fmt: skip
                made = found.call("root", "POST", "/apiKeys/create", {"tenant": tenant,
                                                                      "role": role})  # fmt: skip
                assert made.status == 200, made.body
                key = made.json()
                bearer = f"Bearer {key['key']}:{key['secret']}"
                found.keys[f"{tenant}-{role}"] = Client(service.port, bearer)
            yield found
    finally:
        subprocess.run(
            [sys.executable, "-m", "stack.cli", "down", *args], env=env, timeout=180, check=False,
            capture_output=True,
        )  # fmt: skip


@pytest.fixture(scope="module")
def pump(ops: Ops) -> Iterator[tuple[Probe, str]]:
    """acme's device pump-1, provisioned over HTTP, connected over MQTT with the secret the
    answer showed, answering every command ok with its args echoed."""
    made = ops.call("acme-tenant-admin", "POST", "/ops/devices",
                    {"id": "pump-1", "groups": ["floor-1"]})  # fmt: skip
    assert made.status == 201, made.body
    body = made.json()
    assert body["username"] == "acme/pump-1"
    assert body["secret"]
    probe = Probe(ops.mqtt_port, "acme/pump-1", body["secret"])
    assert probe.connected, f"provisioned device refused: {probe.connack}"

    def answer(_c: Any, _u: Any, msg: Any) -> None:
        parts = msg.topic.split("/")  # tenants/acme/devices/pump-1/commands/<name>
        doc = orjson.loads(msg.payload)  # the args with the command id added
        args = {k: v for k, v in doc.items() if k != "command_id"}
        reply = {"command_id": doc["command_id"], "status": "ok",
                 "result": {"name": parts[-1], "echo": args}}  # fmt: skip
        probe.client.publish(
            f"tenants/acme/devices/pump-1/replies/{doc['command_id']}", orjson.dumps(reply), qos=1
        )

    probe.client.on_message = answer
    assert not probe.subscribe("tenants/acme/devices/pump-1/commands/+").is_failure
    assert not probe.subscribe("tenants/acme/groups/floor-1/commands/+").is_failure
    try:
        yield probe, body["secret"]
    finally:
        probe.close()


def test_command_over_http_succeeds_and_wait_returns_the_reply(
    ops: Ops, pump: tuple[Probe, str]
) -> None:
    started = time.monotonic()
    sent = ops.call("acme-api", "POST", "/ops/commands?wait=45",
                    {"device": "pump-1", "name": "set-rate", "args": {"hz": 5},
                     "timeout_ms": 10000})  # fmt: skip
    print(f"send + wait: {time.monotonic() - started:.2f} s")
    assert sent.status == 200, sent.body
    view = sent.json()
    assert view["state"] == "succeeded"
    assert view["final"] is True
    assert view["tenant"] == "acme"
    assert view["target"] == "pump-1"
    assert [s["state"] for s in view["states"]][-1] == "succeeded"
    results = [r.get("result") for r in view["replies"]]
    assert {"name": "set-rate", "echo": {"hz": 5}} in results, view
    cid = view["command_id"]
    got = ops.call("acme-viewer", "GET", f"/ops/commands/{cid}")
    assert got.status == 200
    assert got.json()["state"] == "succeeded"
    # history from Kafka, filtered, scoped
    since = int(time.time() * 1000) - 600_000
    listed = ops.call("acme-viewer", "GET", f"/ops/commands?device=pump-1&status=succeeded"
                      f"&since={since}")  # fmt: skip
    assert listed.status == 200
    assert cid in [c["command_id"] for c in listed.json()["commands"]]
    none = ops.call("acme-viewer", "GET", f"/ops/commands?status=failed&since={since}")
    assert cid not in [c["command_id"] for c in none.json()["commands"]]
    # another tenant sees nothing of it
    assert ops.call("beta-api", "GET", f"/ops/commands/{cid}").status == 404
    other = ops.call("beta-api", "GET", f"/ops/commands?since={since}").json()["commands"]
    assert cid not in [c["command_id"] for c in other]


def test_group_command_and_no_wait(ops: Ops, pump: tuple[Probe, str]) -> None:
    sent = ops.call("acme-api", "POST", "/ops/commands",
                    {"group": "floor-1", "name": "blink", "timeout_ms": 3000})  # fmt: skip
    assert sent.status == 202, sent.body  # not waited for
    cid = sent.json()["command_id"]

    def state() -> Any:
        return ops.call("acme-api", "GET", f"/ops/commands/{cid}").json().get("state")

    # a group command is final when its reply window (timeout_ms) closes
    assert wait_for(lambda: state() == "succeeded", 60), state()


def test_tenant_scoping(ops: Ops, pump: tuple[Probe, str]) -> None:
    # beta's key: acme's device does not exist for it, neither by path nor by tenant field
    assert ops.call("beta-api", "GET", "/ops/devices/acme/pump-1").status == 404
    refused = ops.call("beta-api", "POST", "/ops/commands",
                       {"device": "pump-1", "tenant": "acme", "name": "reboot"})  # fmt: skip
    assert refused.status == 404
    assert refused.json()["mrstatus"] == 3001
    assert ops.call("beta-api", "POST", "/ops/commands",
                    {"device": "pump-1", "name": "reboot"}).status == 404  # fmt: skip
    assert ops.call("beta-api", "GET", "/ops/devices?tenant=acme").status == 404
    listed = ops.call("beta-api", "GET", "/ops/devices").json()
    assert listed["devices"] == []
    assert ops.call("beta-api", "GET", "/ops/devices/acme/pump-1/telemetry").status == 404
    # and may change nothing of acme's
    assert ops.call("beta-api", "POST", "/ops/devices/acme/pump-1/disable").status in (403, 404)
    # acme's key sees its device
    mine = ops.call("acme-viewer", "GET", "/ops/devices").json()
    assert [d["id"] for d in mine["devices"]] == ["pump-1"]
    # tenants: each tenant key sees its own only; no one but the system admin creates
    assert [t["id"] for t in ops.call("beta-api", "GET", "/ops/tenants").json()["tenants"]] == [
        "beta"
    ]
    assert ops.call("acme-tenant-admin", "POST", "/ops/tenants", {"id": "x1"}).status == 403


def test_viewer_and_api_roles_cannot_provision_or_send(ops: Ops, pump: tuple[Probe, str]) -> None:
    for who in ("acme-viewer", "acme-api"):
        refused = ops.call(who, "POST", "/ops/devices", {"id": "nope-1"})
        assert refused.status == 403
        assert refused.json()["mrstatus"] == 4002
        assert ops.call(who, "POST", "/ops/devices/acme/pump-1/rotate").status == 403
        assert ops.call(who, "DELETE", "/ops/devices/acme/pump-1").status == 403
    assert ops.call("acme-viewer", "POST", "/ops/commands",
                    {"device": "pump-1", "name": "reboot"}).status == 403  # fmt: skip
    assert ops.call("acme-viewer", "GET", "/ops/devices/acme/pump-1").status == 200
    # no credentials at all
    assert Client(ops.service.port).request("GET", "/ops/devices").status == 401


def test_presence_and_device_details(ops: Ops, pump: tuple[Probe, str]) -> None:
    probe, _ = pump
    assert not probe.publish("tenants/acme/devices/pump-1/status", b"online").is_failure

    def online() -> bool:
        found = ops.call("acme-viewer", "GET", "/ops/devices?state=online").json()["devices"]
        return [d["id"] for d in found] == ["pump-1"]

    assert wait_for(online, 60)
    detail = ops.call("acme-viewer", "GET", "/ops/devices/acme/pump-1").json()
    assert detail["online"] is True
    assert detail["last_seen"] is not None
    assert detail["groups"] == ["floor-1"]
    assert detail["username"] == "acme/pump-1"
    groups = ops.call("acme-viewer", "GET", "/ops/groups").json()["groups"]
    assert groups == [{"tenant": "acme", "name": "floor-1", "devices": ["pump-1"]}]


class Stream:
    """An SSE request read line by line on a thread."""

    def __init__(self, port: int, path: str, auth: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", path, headers={"Authorization": auth})
        self.response = self.conn.getresponse()
        self.lines: queue.Queue[str] = queue.Queue()
        if self.response.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.response:
                self.lines.put(raw.decode().rstrip("\n"))
        except (OSError, ValueError, AttributeError):  # closed under the reader
            pass

    def data(self, timeout: float) -> list[Any]:
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
                return out
        return out

    def close(self) -> None:
        self.conn.close()


def test_telemetry_stream_and_its_cap(ops: Ops, pump: tuple[Probe, str]) -> None:
    probe, _ = pump
    auth = ops.keys["acme-viewer"].auth
    assert auth is not None
    first = Stream(ops.service.port, "/ops/devices/acme/pump-1/telemetry", auth)
    assert first.response.status == 200, first.response.read()
    assert first.response.getheader("Content-Type", "").startswith("text/event-stream")
    second = Stream(ops.service.port, "/ops/devices/acme/pump-1/telemetry", auth)
    try:
        assert second.response.status == 200
        # max_sse_streams=2: the third is refused at once, MR's body
        third = ops.call("acme-viewer", "GET", "/ops/devices/acme/pump-1/telemetry")
        assert third.status == 429, third.body
        assert third.json()["mrstatus"] == 5012
        time.sleep(1.0)  # the followers are assigned at the end: publish after
        doc = {"ts": int(time.time() * 1000), "seq": 7, "metrics": {"marker": 4242}}
        assert not probe.publish("tenants/acme/devices/pump-1/telemetry",
                                 orjson.dumps(doc)).is_failure  # fmt: skip
        got = first.data(30)
        assert got, "no telemetry event within 30 s"
        assert got[0]["metrics"] == {"marker": 4242}, got
    finally:
        first.close()
        second.close()
    # closed streams free their places
    again = Stream(ops.service.port, "/ops/devices/acme/pump-1/telemetry", auth)
    try:
        deadline = time.monotonic() + 15
        while again.response.status == 429 and time.monotonic() < deadline:
            again.close()
            time.sleep(0.5)
            again = Stream(ops.service.port, "/ops/devices/acme/pump-1/telemetry", auth)
        assert again.response.status == 200
    finally:
        again.close()


def test_rotate_disable_and_audit(ops: Ops, pump: tuple[Probe, str], tmp_path: Path) -> None:
    made = ops.call("acme-tenant-admin", "POST", "/ops/devices", {"id": "valve-9"})
    assert made.status == 201
    old = made.json()["secret"]
    assert ops.call("acme-tenant-admin", "POST", "/ops/devices", {"id": "valve-9"}).status == 409
    rotated = ops.call("acme-tenant-admin", "POST", "/ops/devices/acme/valve-9/rotate")
    assert rotated.status == 200
    new = rotated.json()["secret"]
    assert new
    assert new != old
    refused = Probe(ops.mqtt_port, "acme/valve-9", old)
    assert not refused.connected
    fresh = Probe(ops.mqtt_port, "acme/valve-9", new)
    assert fresh.connected
    fresh.close()
    off = ops.call("acme-tenant-admin", "POST", "/ops/devices/acme/valve-9/disable")
    assert off.status == 200
    assert off.json()["device"]["disabled"] is True
    assert not Probe(ops.mqtt_port, "acme/valve-9", new).connected
    assert ops.call("acme-tenant-admin", "DELETE", "/ops/devices/acme/valve-9").status == 200
    assert ops.call("acme-viewer", "GET", "/ops/devices/acme/valve-9").status == 404
    # every change is on the registry's audit trail under the key's name
    key = ops.keys["acme-tenant-admin"].auth or ""
    actor = "apikey/" + key.split()[1].split(":")[0]
    records = [json.loads(v) for _k, v in read_topic(ops.bootstrap, "iot.registry.audit",
                                                     10**6, timeout=10)]  # fmt: skip
    actions = {r.get("action") for r in records if r.get("actor") == actor}
    assert {"device.add", "device.rotate", "device.disable", "device.delete"} <= actions, actions
