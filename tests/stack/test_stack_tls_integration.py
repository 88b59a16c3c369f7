"""The mutual-TLS listener through the real `iot-stack up` (issue 13, deliverable 3).

`up` makes the appliance CA and opens the listener; `iot-devices cert` issues certificates
from that CA; a device of the default tenant and a same-named one of tenant acme connect with
them, their subject is their identity, and their telemetry reaches their own Kafka topics. A
certificate of another CA is refused; a revoked one after Mosquitto's SIGHUP. The listener's
behaviour case by case is tests/registry/test_tls.py's (a listener of its own).
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from registry import pki
from stack.ports import free_ports
from tests.plugins.jvm_options import environ_without_settings
from tests.registry.mqtt_probe import Probe
from tests.registry.test_tls import OK, _refused
from tests.stack.test_stack_auth_integration import _pid_of, _run

pytestmark = pytest.mark.integration


def _wait_for_topic(bootstrap: str, topic: str, timeout: float) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + timeout
    try:
        while not consumer.list_topics(topic, 5).topics[topic].partitions:
            assert time.monotonic() < deadline, f"{topic} not created within {timeout} s"
            time.sleep(0.5)
    finally:
        consumer.close()


def _records(
    bootstrap: str, topic: str, want: int, timeout: float = 90
) -> list[tuple[str, dict[str, str]]]:
    """(key, headers) of the first ``want`` records of ``topic`` (all partitions, from 0)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
         "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    found: list[tuple[str, dict[str, str]]] = []
    deadline = time.monotonic() + timeout
    try:
        while (
            time.monotonic() < deadline
            and not consumer.list_topics(topic, 5).topics[topic].partitions
        ):
            time.sleep(0.5)  # the bridge creates a new tenant's topics
        consumer.assign(
            [
                TopicPartition(topic, p, 0)
                for p in consumer.list_topics(topic, 5).topics[topic].partitions
            ]
        )
        while time.monotonic() < deadline and len(found) < want:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            raw: list[tuple[str, bytes | None]] = list(msg.headers() or [])  # type: ignore[arg-type]
            headers = {k: (v or b"").decode() for k, v in raw}
            found.append(((msg.key() or b"").decode(), headers))
    finally:
        consumer.close()
    return found


def test_up_opens_the_mutual_tls_listener_of_its_ca(tmp_path: Path) -> None:
    mqtt, tls, kafka, controller, bridge_http, commands_http, api_http = free_ports(7)
    data_dir = (tmp_path / "var").resolve()
    certs = tmp_path / "certs"
    args = [
        "--data-dir", str(data_dir),
        "--mqtt-port", str(mqtt),
        "--mqtt-tls-port", str(tls),
        "--kafka-port", str(kafka),
        "--kafka-controller-port", str(controller),
        "--bridge-http-port", str(bridge_http),
        "--commands-http-port", str(commands_http),
        "--api-port", str(api_http),
    ]  # fmt: skip
    env = environ_without_settings()
    env |= {"IOT_KAFKA_HEAP": "512m", "IOT_START_TIMEOUT": "180"}
    bootstrap = f"127.0.0.1:{kafka}"
    registry = [
        "--kafka-bootstrap", bootstrap, "--mqtt-host", "127.0.0.1", "--mqtt-port", str(mqtt),
        "--admin-password-file", str(data_dir / "secrets" / "registry-admin.secret"),
        "--ca-dir", str(data_dir / "ca"), "--json",
    ]  # fmt: skip

    def devices(*more: str) -> dict[str, str]:
        done = _run("registry", [*registry, *more], env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    up = _run(
        "stack.cli", ["up", *args, "--partitions", "1", "--no-api", "--commands-mode", "off"], env
    )
    try:
        assert up.returncode == 0, up.stderr
        ca_crt = data_dir / "ca" / "ca.crt"
        assert f"mqtt_tls   mqtts://127.0.0.1:{tls} (mutual TLS, CA {ca_crt})" in up.stdout
        status = _run("stack.cli", ["status", *args], env)
        assert status.returncode == 0, status.stdout
        [row] = [ln for ln in status.stdout.splitlines() if ln.startswith("mosquitto")]
        assert row.endswith(f"mqtt://127.0.0.1:{mqtt}, mqtts://127.0.0.1:{tls}")

        # certificates from the CA `up` made; the subject is the identity, tenant included
        issued = devices("cert", "dev-t", "--out", str(certs))
        assert issued["username"] == "dev-t"
        devices("tenant", "create", "acme")
        assert devices("cert", "--tenant", "acme", "dev-t", "--out", str(certs))["username"] == (
            "acme/dev-t"
        )
        assert (certs / "ca.crt").read_bytes() == ca_crt.read_bytes()
        # the bridge reads new tenants every 5 s and creates their topics before it takes their
        # records (earlier ones are dead-lettered as tenant_not_ready): wait for acme's
        _wait_for_topic(bootstrap, "iot.acme.telemetry", 60)
        time.sleep(1.0)  # the topics first, then the pipeline learns the tenant is ready

        def probe(stem: str) -> Probe:
            return Probe(
                tls,
                None,
                None,
                tls=(certs / "ca.crt", certs / f"{stem}.crt", certs / f"{stem}.key"),
            )

        body = json.dumps({"ts": int(time.time() * 1000), "seq": 0, "metrics": {"t": 1.5}})
        plain, acme = probe("dev-t"), probe("acme_dev-t")
        try:
            assert plain.connected, (plain.connack, plain.error)
            assert acme.connected, (acme.connack, acme.error)
            for seq in range(3):
                payload = body.replace('"seq": 0', f'"seq": {seq}').encode()
                assert plain.publish("devices/dev-t/telemetry", payload).getName() in OK
                assert acme.publish("tenants/acme/devices/dev-t/telemetry", payload).getName() in OK
            # its dynsec role: nothing outside its own topics, whatever it claims
            assert (
                plain.publish("tenants/acme/devices/dev-t/telemetry", body.encode()).value == 0x87
            )
        finally:
            plain.close()
            acme.close()
        default_records = _records(bootstrap, "iot.telemetry", 3)
        assert [k for k, _ in default_records] == ["dev-t"] * 3
        assert all("tenant" not in h for _, h in default_records)
        acme_records = _records(bootstrap, "iot.acme.telemetry", 3)
        assert [(k, h["tenant"]) for k, h in acme_records] == [("dev-t", "acme")] * 3

        # a certificate for dev-t from another CA: refused in the handshake
        now = dt.datetime.now(dt.UTC)
        rogue_key = pki.new_key()
        rogue_ca = pki.Authority(rogue_key, pki.build_ca(rogue_key, "rogue", now, 30))
        key = pki.new_key()
        rogue = pki.build_device(rogue_ca, key.public_key(), "default", "dev-t", now=now, days=30)
        (certs / "rogue.crt").write_bytes(pki.cert_pem(rogue))
        (certs / "rogue.key").write_bytes(pki.key_pem(key))
        assert _refused(probe("rogue"))

        # the CRL is the listener's: revoked + `reload-crl` (a SIGHUP to the pid `status`
        # shows) = refused at the next connect
        devices("cert", "revoke", "dev-t")
        reload = _run("stack.cli", ["reload-crl", *args], env)
        assert reload.returncode == 0, reload.stderr
        assert f"SIGHUP to Mosquitto (pid {_pid_of(status.stdout, 'mosquitto')})" in reload.stderr
        time.sleep(1.5)  # Mosquitto re-reads its config and the CRL
        assert _refused(probe("dev-t"))
        still = probe("acme_dev-t")
        assert still.connected
        still.close()
    finally:
        _run("stack.cli", ["down", *args], env)
