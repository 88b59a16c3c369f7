"""iot-amqp's amqps listener: TLS with the appliance CA's server certificate, SASL PLAIN or SASL
EXTERNAL with a client certificate `iot-devices cert` issued (registry.cli_certs.issue: the CA
directory plus the fingerprint recorded in the registry), python-qpid-proton's client in
SSLDomain client mode against a real iot-amqp on the session's Kafka."""

from __future__ import annotations

import argparse
import logging
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection, ConnectionClosed

from amqp.config import AmqpConfig
from amqp.errors import ConfigError
from amqp.login import external_device
from amqp.service import AmqpService
from amqp.tls import PeerCert, peer_cert, server_context
from api.http_devices.model import DeviceRef
from registry import cli_certs, pki
from registry.ca_store import CaStore
from registry.config import RegistryConfig
from registry.permissions import local_admin
from registry.service import Registry
from stack.ports import free_port
from stack.topics import TopicSpec, ensure_topics
from tests.amqp.harness import rhea, running_amqp
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.bridge.helpers import Record, consume
from tests.commands.harness import wait_for
from tests.conftest import Endpoints
from tests.registry.conftest import fresh_store

# --- pure: what a certificate stands for ----------------------------------------------------


def _cert(cn: str, o: str) -> PeerCert:
    return PeerCert(cn, o, "sha256:" + "0" * 64, "1")


def test_a_certificate_names_its_device_by_cn_and_o_and_an_authzid_must_agree() -> None:
    assert external_device(_cert("acme/pump-1", "acme"), b"") == DeviceRef("acme", "pump-1")
    assert external_device(_cert("pump-1", "default"), b"") == DeviceRef("default", "pump-1")
    assert external_device(_cert("acme/pump-1", "beta"), b"") is None  # O is not its tenant
    assert external_device(_cert("svc/api", "default"), b"") is None  # no account by cert
    assert external_device(_cert("", ""), b"") is None
    ok = _cert("acme/pump-1", "acme")
    assert external_device(ok, b"pump-1@acme") == DeviceRef("acme", "pump-1")
    assert external_device(ok, b"acme/pump-2") is None  # acting as another device
    assert external_device(ok, b"\xff") is None


def test_peer_cert_reads_cn_o_and_the_registrys_fingerprint(tmp_path: Path) -> None:
    store = CaStore(tmp_path / "ca")
    store.init()
    made = store.issue("acme", "pump-1")
    der = pki.load_cert(made.cert_pem).public_bytes(pki.serialization.Encoding.DER)
    found = peer_cert(der)
    assert found == PeerCert("acme/pump-1", "acme", made.record.fingerprint, made.record.serial)
    assert peer_cert(None) is None


def test_the_tls_context_makes_the_ca_once_and_bad_files_are_one_line_errors(
    tmp_path: Path,
) -> None:
    cfg = AmqpConfig.load([], environ={}, tls_ca_dir=str(tmp_path / "ca"))
    context = server_context(cfg)  # no CA yet: made, as `iot-devices ca init` makes it
    assert context.verify_mode == ssl.CERT_OPTIONAL  # a certificate is optional (PLAIN)
    made = (tmp_path / "ca" / "ca.crt").read_bytes()
    server_context(cfg)
    assert (tmp_path / "ca" / "ca.crt").read_bytes() == made  # kept: devices' certs hang on it
    bad = AmqpConfig.load(
        [], environ={}, tls_ca_dir=str(tmp_path / "ca"),
        tls_cert_file=str(tmp_path / "x.crt"), tls_key_file=str(tmp_path / "x.key"),
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.crt"):
        server_context(bad)


# --- end to end -----------------------------------------------------------------------------


@dataclass
class Tls:
    service: AmqpService
    bootstrap: str
    base: str
    ca: Path
    certs: Path
    secrets: dict[str, str]
    registry: Registry
    cfg: RegistryConfig

    @property
    def url(self) -> str:
        return f"amqps://127.0.0.1:{self.service.cfg.amqps_port}"

    def issue(self, device: str, out: Path | None = None) -> tuple[Path, Path]:
        """`iot-devices cert --tenant acme DEVICE --out DIR`: (cert, key) files."""
        args = argparse.Namespace(tenant="acme", id=device, days=30.0, out=out or self.certs)
        view = cli_certs.issue(self.registry, args, self.cfg)
        return Path(view["cert_file"]), Path(view["key_file"])

    def domain(self, cert: tuple[Path, Path] | None, ca: Path | None = None) -> SSLDomain:
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(str(self.ca / "ca.crt"))
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER)  # the IP SAN: no name check
        if cert is not None:
            domain.set_credentials(str(cert[0]), str(cert[1]), None)
        return domain

    def external(self, cert: tuple[Path, Path]) -> BlockingConnection:
        return BlockingConnection(
            self.url, timeout=20, ssl_domain=self.domain(cert), allowed_mechs="EXTERNAL"
        )

    def send_one(self, cert: tuple[Path, Path]) -> None:
        """Log in with ``cert`` and send one reading (TLS 1.3 tells the client of a refused
        certificate only at its first read after the handshake)."""
        conn = self.external(cert)
        try:
            conn.create_sender(None).send(Message(address="telemetry", body=reading(1)))
        finally:
            conn.close()

    def read(self, seqs: range) -> list[tuple[bytes | None, int]]:
        """(key, seq) of tenant acme's telemetry records whose seq is in ``seqs``."""
        topic = f"{self.base}.acme.telemetry"

        def mine(rs: list[Record]) -> list[tuple[bytes | None, int]]:
            found = [(r.key, r.json()["seq"]) for r in rs]
            return sorted((k, s) for k, s in found if isinstance(s, int) and s in seqs)

        return mine(consume(self.bootstrap, [topic], until=lambda rs: len(mine(rs)) >= len(seqs)))


@pytest.fixture(scope="module")
def tls(
    stack: Endpoints,
    transactions_ready: None,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tls]:
    root = tmp_path_factory.mktemp("amqptls")
    ca = root / "ca"
    CaStore(ca).init()
    store = fresh_store(stack.kafka_bootstrap)
    reg = Registry.open(store, local_admin("test"), None, write=True)
    reg.create_tenant("acme")
    secrets: dict[str, str] = {}
    for device in ("pump-1", "pump-2", "pump-3", "pump-4", "pump-5"):
        secret = reg.add_device("acme", device).secret
        assert secret is not None
        secrets[device] = secret
    cfg = RegistryConfig(
        stack.kafka_bootstrap, store.topic, store.audit_topic, stack.mqtt_host, stack.mqtt_port,
        None, ca_dir=ca,
    )  # fmt: skip
    base = f"amqps{uuid.uuid4().hex[:10]}"
    kinds = ("telemetry", "events", "dlq")
    ensure_topics(
        stack.kafka_bootstrap,
        [TopicSpec(f"{base}.{t}{k}") for k in kinds for t in ("", "acme.")],
        3,
    )
    try:
        with running_amqp(
            kafka_bootstrap=stack.kafka_bootstrap, registry_auth=True,
            registry_topic=store.topic, amqps_port=free_port(), tls_ca_dir=str(ca),
            topic_telemetry=f"{base}.telemetry", topic_events=f"{base}.events",
            topic_dlq=f"{base}.dlq", login_check_s=0.2,
        ) as service:  # fmt: skip
            yield Tls(service, stack.kafka_bootstrap, base, ca, root / "certs", secrets, reg, cfg)
    finally:
        store.close()


def reading(seq: int) -> bytes:
    return orjson.dumps({"ts": 1_700_000_000_000 + seq, "seq": seq, "metrics": {"t": 20.0}})


def seqs(count: int) -> range:
    """Sequence numbers no other test of the session sends (the marker of a test's records)."""
    start = uuid.uuid4().int % 10**9 * 1000
    return range(start, start + count)


@pytest.mark.integration
def test_a_device_logs_in_with_its_certificate_and_its_telemetry_reaches_kafka(tls: Tls) -> None:
    cert = tls.issue("pump-1")
    sent = seqs(3)
    conn = tls.external(cert)
    try:
        sender = conn.create_sender(None)
        for seq in sent:
            sender.send(Message(address="telemetry", body=reading(seq), inferred=True))
    finally:
        conn.close()
    assert tls.read(sent) == [(b"pump-1", seq) for seq in sent]


@pytest.mark.integration
def test_a_certificate_cannot_send_as_another_device(tls: Tls) -> None:
    conn = tls.external(tls.issue("pump-1"))
    try:
        sender = conn.create_sender(None)
        msg = Message(address="telemetry/acme/pump-2", body=reading(1), inferred=True)
        dlv = sender.send(msg, error_states=[])
        assert dlv.remote.condition is not None
        assert dlv.remote.condition.name == "amqp:unauthorized-access"
    finally:
        conn.close()


@pytest.mark.integration
def test_another_cas_certificate_fails_the_handshake_and_the_service_stays_up(
    tls: Tls, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = CaStore(tmp_path / "other")
    other.init()
    made = other.issue("acme", "pump-1")  # the same names, another CA
    (tmp_path / "o.crt").write_bytes(made.cert_pem)
    (tmp_path / "o.key").write_bytes(made.key_pem)
    caplog.set_level(logging.INFO, logger="amqp.service")
    with pytest.raises((ConnectionException, ConnectionClosed)):
        tls.send_one((tmp_path / "o.crt", tmp_path / "o.key"))
    wait_for(lambda: "TLS handshake" in caplog.text, 10, "the refusal's log line")
    conn = tls.external(tls.issue("pump-4"))  # the service is up and takes the next client
    conn.close()


@pytest.mark.integration
def test_a_replaced_or_revoked_certificate_is_refused(
    tls: Tls, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="amqp.connection")
    old = tls.issue("pump-2", tmp_path / "old")
    new = tls.issue("pump-2", tmp_path / "new")  # re-issued: the registry holds the new one
    with pytest.raises(ConnectionException, match="Authentication failed"):
        tls.external(old)
    assert "log-in refused: EXTERNAL, certificate CN='acme/pump-2'" in caplog.text
    tls.external(new).close()
    cert = tls.issue("pump-3")
    (record,) = [r for r in CaStore(tls.ca).issued() if r.username == "acme/pump-3"]
    CaStore(tls.ca).revoke([record.serial])  # what `iot-devices cert revoke` does
    with pytest.raises(ConnectionException, match="Authentication failed"):
        tls.external(cert)


@pytest.mark.integration
def test_a_connection_whose_certificate_is_replaced_is_closed(tls: Tls, tmp_path: Path) -> None:
    conn = tls.external(tls.issue("pump-4", tmp_path / "a"))
    try:
        sender = conn.create_sender(None)
        sender.send(Message(address="telemetry", body=reading(0), inferred=True))
        tls.issue("pump-4", tmp_path / "b")
        import time

        print("ISSUED", time.time(), flush=True)
        # closed within login_check_s (0.2 s) of the re-issue (no other test's connection is open)
        wait_for(lambda: not tls.service.connections, 30, "the connection closed")
        with pytest.raises((ConnectionException, ConnectionClosed)):
            sender.send(Message(address="telemetry", body=reading(1), inferred=True))
    finally:
        conn.close()


@pytest.mark.integration
def test_plain_over_tls_and_never_anonymous(tls: Tls) -> None:
    sent = seqs(1)
    conn = BlockingConnection(
        tls.url, timeout=20, ssl_domain=tls.domain(None), user="acme/pump-1",
        password=tls.secrets["pump-1"], allowed_mechs="PLAIN",
    )  # fmt: skip
    try:
        conn.create_sender("telemetry").send(Message(body=reading(sent[0]), inferred=True))
    finally:
        conn.close()
    assert tls.read(sent) == [(b"pump-1", sent[0])]
    with pytest.raises(ConnectionException, match="Authentication failed"):
        BlockingConnection(
            tls.url, timeout=20, ssl_domain=tls.domain(None), allowed_mechs="ANONYMOUS"
        )
    with pytest.raises(ConnectionException, match="Authentication failed"):
        # EXTERNAL is offered only to a client that showed a certificate
        BlockingConnection(
            tls.url, timeout=20, ssl_domain=tls.domain(None), allowed_mechs="EXTERNAL"
        )


@pytest.mark.integration
def test_rhea_logs_in_with_a_certificate_over_tls(tls: Tls) -> None:
    """An independent client (rhea, npm): TLS trusting the appliance CA, SASL EXTERNAL with the
    certificate `iot-devices cert` issued; its readings land keyed by the certificate's device."""
    cert, key = tls.issue("pump-5")
    env = {"RHEA_CA": str(tls.ca / "ca.crt"), "RHEA_CERT": str(cert), "RHEA_KEY": str(key)}
    device = rhea("device", str(tls.service.cfg.amqps_port), "-", "-", "2", env=env)
    out, err = device.communicate(timeout=60)
    assert device.returncode == 0, err
    assert out.split("\n")[:2] == ["accepted 0", "accepted 1"]
    topic = f"{tls.base}.acme.telemetry"
    found = consume(
        tls.bootstrap, [topic], until=lambda rs: sum(r.key == b"pump-5" for r in rs) >= 2
    )
    assert sorted(str(r.json()["seq"]) for r in found if r.key == b"pump-5") == ["0", "1"]
