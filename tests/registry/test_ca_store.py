"""registry.ca_store: the CA directory (files, modes, first use, operator CA, CRL)."""

from __future__ import annotations

import datetime as dt
import getpass
import pwd
from pathlib import Path

import pytest
from cryptography import x509

from registry import pki
from registry.ca_store import CaError, CaStore
from registry.errors import NotFoundError


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_created_once_keys_private(tmp_path: Path) -> None:
    store = CaStore(tmp_path / "ca")
    assert not store.exists()
    with pytest.raises(CaError, match="ca init"):
        store.authority()
    assert store.init(["localhost", "127.0.0.1", "iot.example"])
    assert _mode(store.ca_key) == 0o600
    assert _mode(store.server_key) == 0o600
    first = store.ca_cert.read_bytes()
    assert not store.init()  # an existing CA is never replaced
    assert store.ca_cert.read_bytes() == first
    server = pki.load_cert(store.server_cert.read_bytes())
    server.verify_directly_issued_by(store.authority().cert)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "iot.example" in san.get_values_for_type(x509.DNSName)
    crl = x509.load_pem_x509_crl(store.crl.read_bytes())
    assert len(list(crl)) == 0
    assert not list(tmp_path.glob("ca/*.tmp"))


def test_operator_ca_is_used_and_checked(tmp_path: Path) -> None:
    key = pki.new_key()
    cert = pki.build_ca(key, "operator CA", dt.datetime.now(dt.UTC), 30)
    (tmp_path / "op.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "op.key").write_bytes(pki.key_pem(key))
    (tmp_path / "other.key").write_bytes(pki.key_pem(pki.new_key()))
    with pytest.raises(CaError, match="does not belong"):
        CaStore(tmp_path / "bad").init(own_ca=(tmp_path / "op.crt", tmp_path / "other.key"))
    store = CaStore(tmp_path / "ca")
    assert store.init(own_ca=(tmp_path / "op.crt", tmp_path / "op.key"))
    assert store.authority().cert == cert
    issued = store.issue("acme", "pump-1", days=2)
    pki.load_cert(issued.cert_pem).verify_directly_issued_by(cert)


def test_issue_indexes_and_revoke_writes_crl(tmp_path: Path) -> None:
    store = CaStore(tmp_path / "ca")
    store.init()
    a = store.issue("default", "dev-a")
    b = store.issue("acme", "dev-a", days=1, not_before=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    cert_a, cert_b = pki.load_cert(a.cert_pem), pki.load_cert(b.cert_pem)
    assert a.record.username == "dev-a"
    assert b.record.username == "acme/dev-a"
    assert a.record.fingerprint == pki.fingerprint(cert_a)
    assert cert_b.not_valid_after_utc < dt.datetime.now(dt.UTC)  # issued expired
    assert pki.load_key(a.key_pem).public_key() == cert_a.public_key()
    assert [r.serial for r in store.issued()] == [a.record.serial, b.record.serial]
    assert a.key_pem not in (store.dir / "issued.json").read_bytes()  # keys are not kept

    done = store.revoke([a.record.serial.upper()])
    assert [r.serial for r in done] == [a.record.serial]
    assert store.revoke([a.record.serial]) == []  # already revoked
    crl = x509.load_pem_x509_crl(store.crl.read_bytes())
    assert crl.get_revoked_certificate_by_serial_number(cert_a.serial_number) is not None
    assert crl.get_revoked_certificate_by_serial_number(cert_b.serial_number) is None
    assert crl.is_signature_valid(store.authority().key.public_key())
    with pytest.raises(NotFoundError):
        store.revoke(["abc"])


def test_listener_conf_points_at_the_files(tmp_path: Path) -> None:
    store = CaStore(tmp_path / "ca")
    store.init()
    text = store.listener_conf(18883, "127.0.0.1")
    assert f"cafile {store.ca_cert.resolve()}" in text
    assert f"crlfile {store.crl.resolve()}" in text
    assert text.startswith("listener 18883 127.0.0.1\n")


def test_server_key_given_to_mosquittos_user(tmp_path: Path) -> None:
    store = CaStore(tmp_path / "ca")
    store.init(key_owner=getpass.getuser())
    assert pwd.getpwuid(store.server_key.stat().st_uid).pw_name == getpass.getuser()
    assert _mode(store.server_key) == 0o600
