"""Mutual TLS on a real Mosquitto 2.0.11: the appliance CA, device certificates as identity
(use_identity_as_username + dynsec roles), and refusal of foreign, expired, revoked and missing
certificates. The listener is the one `iot-devices ca mosquitto-conf` renders."""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from registry import pki
from registry.ca_store import CaStore
from registry.cli import main
from registry.kafka_store import KafkaStore
from tests.registry.conftest import free_port, mosquitto_process
from tests.registry.mqtt_probe import Probe, wait_for

pytestmark = pytest.mark.integration

OK = ("Success", "No matching subscribers")


@dataclass
class TlsBroker:
    tls_port: int
    ca_dir: Path
    out: Path  # device keys and certificates written by `iot-devices cert --out`
    log: Path
    hup: Callable[[], None]
    cli: Callable[..., str]

    def files(self, stem: str) -> tuple[Path, Path | None, Path | None]:
        return (self.out / "ca.crt", self.out / f"{stem}.crt", self.out / f"{stem}.key")

    def probe(self, stem: str, **kw: object) -> Probe:
        return Probe(self.tls_port, None, None, tls=self.files(stem), **kw)  # type: ignore[arg-type]


@pytest.fixture
def tls_broker(
    tmp_path: Path,
    store_factory: Callable[[], KafkaStore],
    capsys: pytest.CaptureFixture[str],
) -> Iterator[TlsBroker]:
    store = store_factory()
    dynsec, secret, ca_dir = tmp_path / "dynsec.json", tmp_path / "admin.secret", tmp_path / "ca"
    assert main(["mosquitto-init", str(dynsec), "--password-file", str(secret)]) == 0
    assert main([f"--ca-dir={ca_dir}", "ca", "init", "--server-name", "iot.example"]) == 0
    tls_port = free_port()
    capsys.readouterr()
    conf_args = ["ca", "mosquitto-conf", "--port", str(tls_port), "--bind", "127.0.0.1"]
    assert main([f"--ca-dir={ca_dir}", *conf_args]) == 0
    listener = capsys.readouterr().out
    with mosquitto_process(dynsec, tmp_path, listener) as (port, log, proc):
        base = [
            f"--kafka-bootstrap={store.bootstrap}",
            f"--topic={store.topic}",
            f"--audit-topic={store.audit_topic}",
            "--mqtt-host=127.0.0.1",
            f"--mqtt-port={port}",
            f"--admin-password-file={secret}",
            f"--ca-dir={ca_dir}",
        ]

        def cli(*args: str) -> str:
            capsys.readouterr()
            code = main([*base, *args])
            out, err = capsys.readouterr()
            assert code == 0, f"{args}: exit {code}\n{out}\n{err}"
            return out

        def hup() -> None:
            mark = log.read_text().count("Reloading config.")
            proc.send_signal(signal.SIGHUP)
            assert wait_for(lambda: log.read_text().count("Reloading config.") > mark)

        cli("init")
        yield TlsBroker(tls_port, ca_dir, tmp_path / "certs", log, hup, cli)


def _refused(probe: Probe) -> bool:
    """No CONNACK: the TLS handshake failed (TLS 1.2: at connect; 1.3: on the first read)."""
    try:
        return probe.connack is None and (probe.error is not None or probe.disconnect is not None)
    finally:
        if probe.error is None:
            probe.close()


def test_appliance_certificate_is_the_device_identity(tls_broker: TlsBroker) -> None:
    b = tls_broker
    out = b.cli("--json", "cert", "dev-a", "--out", str(b.out))
    issued = json.loads(out)
    assert issued["username"] == "dev-a"
    assert (b.out / "dev-a.key").stat().st_mode & 0o777 == 0o600
    b.cli("cert", "dev-b", "--out", str(b.out), "--days", "2")
    b.cli("tenant", "create", "acme")
    b.cli("cert", "--tenant", "acme", "dev-a", "--out", str(b.out))
    # the registry knows the certificate: a new device is added certificate-only
    shown = json.loads(b.cli("--json", "device", "show", "dev-a"))
    assert shown["credentials"] == {"kinds": ["cert"], "cert_fingerprint": issued["fingerprint"]}

    # a password device that gets a certificate keeps both (the audit trail says so)
    secret = b.cli("device", "add", "dev-s").split("secret: ")[1].split()[0]
    b.cli("cert", "dev-s", "--out", str(b.out))
    both = json.loads(b.cli("--json", "device", "show", "dev-s"))
    assert both["credentials"]["kinds"] == ["secret", "cert"]
    assert "device.cert" in b.cli("audit", "--entity", "device/default/dev-s")
    assert secret

    dev_b = b.probe("dev-b")
    dev_a = b.probe("dev-a")
    acme_a = b.probe("acme_dev-a")
    probes = [dev_a, dev_b, acme_a]
    try:
        for p in probes:
            assert p.connected, (p.connack, p.error, p.disconnect)
        assert dev_a.publish("devices/dev-a/telemetry").getName() in OK
        # its dynsec role applies as for a password login: MQTT 5 PUBACK 0x87
        assert dev_a.publish("devices/dev-b/telemetry").value == 0x87
        assert dev_a.subscribe("devices/dev-b/commands/#").value == 0x87
        assert acme_a.publish("tenants/acme/devices/dev-a/telemetry").getName() in OK
        assert acme_a.publish("devices/dev-a/telemetry").value == 0x87
        dev_a.close()
        # user name and client id sent by the client are ignored: still dev-a, dev-b stays
        impostor = Probe(b.tls_port, "dev-b", "x", "dev-b", tls=b.files("dev-a"))
        probes.append(impostor)
        assert impostor.connected
        assert impostor.publish("devices/dev-b/telemetry").value == 0x87
        assert dev_b.connected
        assert dev_b.publish("devices/dev-b/telemetry").getName() in OK
    finally:
        for p in probes:
            p.close()
    log = b.log.read_text()
    assert "u'acme/dev-a'" in log
    assert "as dev-b (p5" in log  # dev-b's own connection...
    assert log.count("as dev-a (p5") == 2  # ...and the impostor's, pinned to its certificate


def test_foreign_expired_missing_and_revoked_certificates_refused(tls_broker: TlsBroker) -> None:
    b = tls_broker
    b.cli("cert", "dev-a", "--out", str(b.out))
    b.cli("cert", "dev-r", "--out", str(b.out))
    # a certificate for dev-a from another CA
    rogue_key = pki.new_key()
    now = dt.datetime.now(dt.UTC)
    rogue_ca = pki.Authority(rogue_key, pki.build_ca(rogue_key, "rogue", now, 30))
    key = pki.new_key()
    rogue = pki.build_device(rogue_ca, key.public_key(), "default", "dev-a", now=now, days=30)
    (b.out / "rogue.crt").write_bytes(pki.cert_pem(rogue))
    (b.out / "rogue.key").write_bytes(pki.key_pem(key))
    # an expired one from the appliance CA (valid for a day, ten days ago)
    expired = CaStore(b.ca_dir).issue("default", "dev-a", 1, now - dt.timedelta(days=10))
    (b.out / "expired.crt").write_bytes(expired.cert_pem)
    (b.out / "expired.key").write_bytes(expired.key_pem)

    assert _refused(b.probe("rogue"))
    assert _refused(b.probe("expired"))
    assert _refused(Probe(b.tls_port, "dev-a", None, tls=(b.out / "ca.crt", None, None)))
    good = b.probe("dev-a")
    assert good.connected
    good.close()
    log = b.log.read_text()
    assert log.count("certificate verify failed") >= 2
    assert "peer did not return a certificate" in log

    b.cli("cert", "revoke", "dev-r")
    connected = b.probe("dev-r")
    assert connected.connected  # Mosquitto reads the CRL at start and on SIGHUP only
    t0 = time.monotonic()
    b.hup()
    assert _refused(b.probe("dev-r"))
    measured = f"revoked certificate refused {time.monotonic() - t0:.3f}s after SIGHUP"
    sys.__stderr__.write(measured + "\n")  # type: ignore[union-attr]  # past capsys: a measurement
    # the revoked device's open connection is not dropped by the reload
    time.sleep(1)
    assert connected.connected
    assert connected.publish("devices/dev-r/telemetry").getName() in OK
    # what cuts it: `device disable` (dynsec kicks the user name), and it cannot come back
    t1 = time.monotonic()
    b.cli("device", "disable", "dev-r")
    assert connected.wait_gone(5)
    assert connected.disconnect is not None
    assert connected.disconnect.value == 0x98  # Administrative action
    sys.__stderr__.write(f"revoked+disabled dropped in {time.monotonic() - t1:.3f}s\n")  # type: ignore[union-attr]
    assert _refused(b.probe("dev-r"))
    connected.close()
    again = b.probe("dev-a")  # other devices unaffected by the reload
    assert again.connected
    again.close()
    # a disabled certificate device: Mosquitto skips dynsec's disabled check for certificate
    # logins (2.0.11), so the registry takes its role away: it connects but can do nothing
    b.cli("cert", "dev-d", "--out", str(b.out))
    b.cli("device", "disable", "dev-d")
    mute = b.probe("dev-d")
    try:
        assert mute.connected
        assert mute.publish("devices/dev-d/telemetry").value == 0x87
        assert mute.subscribe("devices/dev-d/commands/#").value == 0x87
    finally:
        mute.close()
    b.cli("device", "enable", "dev-d")
    back = b.probe("dev-d")
    try:
        assert back.connected
        assert back.publish("devices/dev-d/telemetry").getName() in OK
    finally:
        back.close()
    records = json.loads(b.cli("--json", "cert", "list"))
    assert [r["device"] for r in records if r["revoked_at"]] == ["dev-r"]
    assert {r["device"] for r in records} == {"dev-a", "dev-r", "dev-d"}
