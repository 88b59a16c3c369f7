"""registry.pki: what the certificates say (subject = registry identity, SANs, CRL)."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from registry import hashing, pki

NOW = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def ca() -> pki.Authority:
    key = pki.new_key()
    return pki.Authority(key, pki.build_ca(key, "test CA", NOW, 10))


def test_ca_signs_end_entities_only(ca: pki.Authority) -> None:
    basic = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert basic.ca
    assert basic.path_length == 0
    usage = ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert usage.crl_sign
    assert ca.cert.not_valid_after_utc == NOW + dt.timedelta(days=10)
    assert ca.cert.not_valid_before_utc == NOW - pki.CLOCK_SKEW
    pki.check_ca_pair(ca.key, ca.cert)


def test_device_subject_is_its_mqtt_user_name(ca: pki.Authority) -> None:
    key = pki.new_key()
    default = pki.build_device(ca, key.public_key(), "default", "pump-1", now=NOW, days=1)
    other = pki.build_device(ca, key.public_key(), "acme", "pump-1", now=NOW, days=1)
    assert pki.common_name(default) == "pump-1"
    assert pki.common_name(other) == "acme/pump-1"  # as registry.topics.device_username
    org = other.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
    assert org == "acme"
    eku = other.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert other.issuer == ca.cert.subject
    other.verify_directly_issued_by(ca.cert)  # raises if the CA did not sign it
    assert default.serial_number != other.serial_number


def test_fingerprint_is_the_registry_form(ca: pki.Authority) -> None:
    cert = pki.build_device(ca, pki.new_key().public_key(), "default", "d", now=NOW, days=1)
    fp = pki.fingerprint(cert)
    assert fp == hashing.normalise_fingerprint(fp)
    assert fp.startswith("sha256:")
    assert len(fp) == 7 + 64


def test_server_sans_split_names_and_ips(ca: pki.Authority) -> None:
    cert = pki.build_server(
        ca, pki.new_key(), ["localhost", "127.0.0.1", "iot.example", "localhost"], now=NOW, days=2
    )
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "iot.example"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    with pytest.raises(ValueError, match="at least one name"):
        pki.build_server(ca, pki.new_key(), [], now=NOW, days=2)


def test_expired_certificate_from_a_start_in_the_past(ca: pki.Authority) -> None:
    start = NOW - dt.timedelta(days=10)
    cert = pki.build_device(ca, pki.new_key().public_key(), "default", "d", now=start, days=1)
    assert cert.not_valid_after_utc < NOW
    with pytest.raises(ValueError, match="> 0"):
        pki.build_device(ca, pki.new_key().public_key(), "default", "d", now=NOW, days=0)


def test_crl_lists_revoked_serials(ca: pki.Authority) -> None:
    crl = pki.build_crl(ca, [pki.Revoked(1234, NOW)], now=NOW, days=30)
    assert crl.is_signature_valid(ca.key.public_key())
    entry = crl.get_revoked_certificate_by_serial_number(1234)
    assert entry is not None
    assert entry.revocation_date_utc == NOW
    assert crl.get_revoked_certificate_by_serial_number(1) is None
    assert crl.next_update_utc == NOW + dt.timedelta(days=30)


def test_pem_round_trip_and_foreign_ca_pair(ca: pki.Authority) -> None:
    assert pki.load_cert(pki.cert_pem(ca.cert)) == ca.cert
    key = pki.load_key(pki.key_pem(ca.key))
    assert key.private_numbers() == ca.key.private_numbers()
    with pytest.raises(ValueError, match="does not belong"):
        pki.check_ca_pair(pki.new_key(), ca.cert)
    leaf_key = pki.new_key()
    leaf = pki.build_device(ca, leaf_key.public_key(), "default", "d", now=NOW, days=1)
    with pytest.raises(ValueError, match="not a CA"):
        pki.check_ca_pair(leaf_key, leaf)


def test_listener_conf_lines() -> None:
    text = pki.listener_conf(
        8883, cafile="/c/ca.crt", certfile="/c/s.crt", keyfile="/c/s.key", crlfile="/c/crl.pem",
        bind="127.0.0.1",
    )  # fmt: skip
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == "listener 8883 127.0.0.1"
    for want in (
        "cafile /c/ca.crt", "certfile /c/s.crt", "keyfile /c/s.key", "crlfile /c/crl.pem",
        "require_certificate true", "use_identity_as_username true",
        "use_username_as_clientid true",
    ):  # fmt: skip
        assert want in lines
    assert all("#" not in line for line in lines)  # comments on their own lines only
