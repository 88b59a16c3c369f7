"""The amqps listener's TLS (adapter; docs/amqp.md "TLS and SASL EXTERNAL").

The server certificate is the operator's files, or else the appliance CA's (``registry.ca_store``,
made as `iot-devices ca init` makes it when there is none), as iot-api's HTTPS and Mosquitto's
8883. Client certificates are optional (a client without one logs in with SASL PLAIN) and, when
given, must chain to the appliance CA: another CA's fails the handshake. What the certificate
names and its SHA-256 fingerprint (:class:`PeerCert`) decide a SASL EXTERNAL log-in
(amqp.login), against the fingerprint the registry recorded for the device.

asyncio's ``ssl`` rather than proton's ``SSLDomain``: SASL is done in Python before proton's
engine sees a byte (amqp.sasl), so the TLS layer has to be below that, on the stream.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from amqp.config import AmqpConfig
from amqp.errors import ConfigError
from registry import hashing
from registry.ca_store import CaStore
from registry.errors import RegistryError


@dataclass(frozen=True, slots=True)
class PeerCert:
    """A verified client certificate: subject CN and O, ``sha256:<hex>`` fingerprint."""

    common_name: str
    organisation: str
    fingerprint: str
    serial: str  # hex, as the CA's issued index writes it


def _attribute(name: x509.Name, oid: x509.ObjectIdentifier) -> str:
    found = name.get_attributes_for_oid(oid)
    value = found[0].value if len(found) == 1 else ""
    return value if isinstance(value, str) else ""


def peer_cert(der: bytes | None) -> PeerCert | None:
    """What a DER client certificate (already verified by the handshake) names."""
    if not der:
        return None
    cert = x509.load_der_x509_certificate(der)
    return PeerCert(
        _attribute(cert.subject, NameOID.COMMON_NAME),
        _attribute(cert.subject, NameOID.ORGANIZATION_NAME),
        hashing.fingerprint_of_der(der),
        f"{cert.serial_number:x}",
    )


def ca_store(cfg: AmqpConfig) -> CaStore:
    return CaStore(Path(cfg.tls_ca_dir))


def server_context(cfg: AmqpConfig) -> ssl.SSLContext:
    """TLS 1.2+, the server certificate, client certificates of the appliance CA optional."""
    store = ca_store(cfg)
    try:
        store.init()  # nothing changes when the CA exists
    except (RegistryError, OSError, ValueError) as exc:
        raise ConfigError(f"the appliance CA in {store.dir}: {exc}") from exc
    cert, key = store.server_cert, store.server_key
    if cfg.tls_cert_file:
        cert, key = Path(cfg.tls_cert_file), Path(cfg.tls_key_file)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
        context.load_verify_locations(cafile=str(store.ca_cert))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"TLS certificate {cert} / key {key} / CA {store.ca_cert}: {exc}"
        ) from exc
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def revoked(cfg: AmqpConfig, cert: PeerCert) -> bool:
    """Whether `iot-devices cert revoke` revoked this certificate (the CA's issued index, read
    at each EXTERNAL log-in: revocations apply to the next connection without a restart)."""
    try:
        records = json.loads(ca_store(cfg).index.read_text())
    except (OSError, ValueError):
        return False  # no index: a CA of the operator's that issued elsewhere
    return any(
        isinstance(r, dict) and r.get("serial") == cert.serial and r.get("revoked_at")
        for r in records
    )
