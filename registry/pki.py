"""Certificates for mutual TLS with `cryptography` (pure: no files, no sockets).

The appliance CA signs a server certificate for Mosquitto's TLS listener and one client
certificate per device. A device certificate's subject is ``CN={MQTT user name}, O={tenant}``:
with ``use_identity_as_username true`` Mosquitto takes the CN as the user name, so the
certificate names the same principal as a password login (registry.topics.device_username)
and the device's dynamic-security role applies unchanged. Keys are EC P-256 (small, fast,
accepted by OpenSSL 3 and every MQTT client library we use).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from registry import hashing, topics

PrivateKey = ec.EllipticCurvePrivateKey
# A certificate is back-dated this much so a device whose clock is slightly behind accepts
# it, and so is the broker for a freshly issued device certificate.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Authority:
    """A CA: its key and certificate."""

    key: PrivateKey
    cert: x509.Certificate


@dataclass(frozen=True)
class Revoked:
    """One CRL entry."""

    serial: int
    at: dt.datetime


def new_key() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organisation: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organisation is not None:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    not_before: dt.datetime,
    days: float,
) -> x509.CertificateBuilder:
    if days <= 0:
        raise ValueError("validity must be > 0 days")
    start = not_before - CLOCK_SKEW
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(not_before + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def build_ca(key: PrivateKey, common_name: str, now: dt.datetime, days: float) -> x509.Certificate:
    """A self-signed CA that may sign end-entity certificates only (path length 0)."""
    name = _name(common_name, "iot-appliance")
    builder = (
        _builder(name, name, key.public_key(), now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    )  # fmt: skip
    return builder.sign(key, hashes.SHA256())


def _leaf(
    ca: Authority,
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    now: dt.datetime,
    days: float,
    usage: x509.ObjectIdentifier,
) -> x509.CertificateBuilder:
    return (
        _builder(subject, ca.cert.subject, public_key, now, days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )


def build_server(
    ca: Authority,
    key: PrivateKey,
    names: Sequence[str],
    *,
    now: dt.datetime,
    days: float,
) -> x509.Certificate:
    """The TLS listener's certificate; ``names`` become SANs (IP addresses as IP entries)."""
    if not names:
        raise ValueError("a server certificate needs at least one name")
    sans: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    builder = _leaf(
        ca, _name(names[0]), key.public_key(), now=now, days=days,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    ).add_extension(x509.SubjectAlternativeName(sans), critical=False)  # fmt: skip
    return builder.sign(ca.key, hashes.SHA256())


def server_names(cert: x509.Certificate) -> list[str]:
    """The names a server certificate's SANs hold (DNS names and IP addresses, as text)."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    ips = [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    return [*sans.get_values_for_type(x509.DNSName), *ips]


def build_device(
    ca: Authority,
    public_key: ec.EllipticCurvePublicKey,
    tenant: str,
    device_id: str,
    *,
    now: dt.datetime,
    days: float,
) -> x509.Certificate:
    """A device's client certificate: CN = its MQTT user name, O = its tenant.

    ``now`` is the start of validity; a ``now`` far enough in the past gives an expired
    certificate (tests use that)."""
    subject = _name(topics.device_username(tenant, device_id), tenant)
    builder = _leaf(
        ca, subject, public_key, now=now, days=days, usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    return builder.sign(ca.key, hashes.SHA256())


def build_crl(
    ca: Authority,
    revoked: Iterable[Revoked],
    *,
    now: dt.datetime,
    days: float,
) -> x509.CertificateRevocationList:
    """The CA's CRL. OpenSSL refuses every client once ``next_update`` has passed, so the
    CRL must be re-issued (``iot-devices ca crl``) before then."""
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.cert.subject)
        .last_update(now - CLOCK_SKEW)
        .next_update(now + dt.timedelta(days=days))
    )
    for entry in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(entry.serial)
            .revocation_date(entry.at)
            .build()
        )
    return builder.sign(ca.key, hashes.SHA256())


def fingerprint(cert: x509.Certificate) -> str:
    """``sha256:<hex>`` as the registry stores it (hashing.normalise_fingerprint)."""
    return hashing.fingerprint_of_der(cert.public_bytes(serialization.Encoding.DER))


def common_name(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def key_pem(key: PrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM: Mosquitto and paho read it without a pass phrase; the
    adapter writes it with mode 0600."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate | x509.CertificateRevocationList) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_key(pem: bytes) -> PrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("only EC private keys are supported for the CA")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def check_ca_pair(key: PrivateKey, cert: x509.Certificate) -> None:
    """ValueError unless ``cert`` is a CA certificate for ``key`` (an operator's own CA)."""
    if cert.public_key() != key.public_key():
        raise ValueError("the CA certificate does not belong to the CA key")
    try:
        basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        basic = None
    if basic is None or not basic.ca:
        raise ValueError("the certificate is not a CA certificate (basicConstraints CA:TRUE)")


def listener_conf(
    port: int,
    *,
    cafile: str,
    certfile: str,
    keyfile: str,
    crlfile: str,
    bind: str | None = None,
) -> str:
    """The mosquitto.conf lines of the mutual-TLS listener (comments on their own lines:
    Mosquitto reads a trailing comment as part of a path)."""
    lines = [
        f"listener {port}" + (f" {bind}" if bind else ""),
        f"cafile {cafile}",
        f"certfile {certfile}",
        f"keyfile {keyfile}",
        "# reloaded on SIGHUP: revocations apply to new connections after `kill -HUP`",
        f"crlfile {crlfile}",
        "require_certificate true",
        "# the certificate's CN is the MQTT user name: dynsec roles apply as for passwords",
        "use_identity_as_username true",
        "# pin the client id to the user name: a certificate cannot take over another session",
        "use_username_as_clientid true",
        "tls_version tlsv1.2",
    ]
    return "\n".join(lines) + "\n"
