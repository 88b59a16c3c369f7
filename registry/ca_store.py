"""The appliance CA on disk: key, certificate, server certificate, issued index and CRL.

Layout of the directory (private keys mode 0600, written atomically):

    ca.key ca.crt         the CA (created on first use, or the operator's own copied in)
    server.key server.crt the TLS listener's certificate, signed by the CA
    crl.pem               revoked serials; Mosquitto reads it at start and on SIGHUP
    issued.json           every device certificate issued: serial, device, fingerprint, dates

Device keys are never stored here: `issue` hands the key to the caller once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from registry import pki
from registry.errors import NotFoundError, RegistryError

DEFAULT_NAMES = ("localhost", "127.0.0.1")
CA_DAYS = 3650.0
SERVER_DAYS = 825.0  # the longest server validity common TLS clients accept
DEVICE_DAYS = 365.0
CRL_DAYS = 365.0  # OpenSSL refuses every client once the CRL's next update has passed


class CaError(RegistryError):
    """The CA directory is missing, incomplete or inconsistent."""


@dataclass(frozen=True)
class CertRecord:
    serial: str  # hex
    tenant: str
    device: str
    username: str
    fingerprint: str
    not_before: str  # ISO 8601 UTC
    not_after: str
    revoked_at: str | None = None


@dataclass(frozen=True)
class IssuedCert:
    """A new device certificate and its private key (shown or written once)."""

    record: CertRecord
    key_pem: bytes
    cert_pem: bytes


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)  # the umask may have narrowed it; never widen a key beyond `mode`
    os.replace(tmp, path)


class CaStore:
    def __init__(self, directory: Path, clock: Callable[[], float] = time.time) -> None:
        self.dir = directory
        self._clock = clock

    ca_key = property(lambda self: self.dir / "ca.key")
    ca_cert = property(lambda self: self.dir / "ca.crt")
    server_key = property(lambda self: self.dir / "server.key")
    server_cert = property(lambda self: self.dir / "server.crt")
    crl = property(lambda self: self.dir / "crl.pem")
    index = property(lambda self: self.dir / "issued.json")

    def _now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self._clock(), dt.UTC)

    def exists(self) -> bool:
        return self.ca_key.exists() and self.ca_cert.exists()

    def init(
        self,
        names: Sequence[str] = DEFAULT_NAMES,
        own_ca: tuple[Path, Path] | None = None,
        days: float = CA_DAYS,
        key_owner: str | None = None,
    ) -> bool:
        """Create the CA (or copy the operator's ``(cert, key)``), the server certificate
        and an empty CRL; False (and nothing changed) if the CA exists already."""
        if self.exists():
            return False
        self.dir.mkdir(parents=True, exist_ok=True)
        now = self._now()
        if own_ca is not None:
            key = pki.load_key(own_ca[1].read_bytes())
            cert = pki.load_cert(own_ca[0].read_bytes())
            try:
                pki.check_ca_pair(key, cert)
            except ValueError as exc:
                raise CaError(f"operator CA refused: {exc}") from exc
        else:
            key = pki.new_key()
            cert = pki.build_ca(key, "iot-appliance device CA", now, days)
        _write(self.ca_key, pki.key_pem(key), 0o600)
        _write(self.ca_cert, pki.cert_pem(cert))
        self._save([])
        self.issue_server(names, key_owner=key_owner)
        self.write_crl()
        return True

    def authority(self) -> pki.Authority:
        if not self.exists():
            raise CaError(f"no CA in {self.dir}: run `iot-devices ca init`")
        return pki.Authority(
            pki.load_key(self.ca_key.read_bytes()), pki.load_cert(self.ca_cert.read_bytes())
        )

    def issue_server(
        self,
        names: Sequence[str] = DEFAULT_NAMES,
        days: float = SERVER_DAYS,
        key_owner: str | None = None,
    ) -> None:
        """(Re)issue the listener's certificate, e.g. for new host names. ``key_owner``: the
        user Mosquitto runs as (started as root it drops to ``mosquitto`` *before* reading
        the key: measured "Unable to load server key file ... Permission denied")."""
        key = pki.new_key()
        cert = pki.build_server(self.authority(), key, names, now=self._now(), days=days)
        _write(self.server_key, pki.key_pem(key), 0o600)
        if key_owner is not None:
            shutil.chown(self.server_key, key_owner)
        _write(self.server_cert, pki.cert_pem(cert))

    def cover_names(self, names: Sequence[str], key_owner: str | None = None) -> bool:
        """Issue the server certificate again when it lacks one of ``names`` (a CA made before a
        name was added: an upgrade whose compose services gained `api` and `amqp`, or new
        IOT_STACK_TLS_SERVER_NAMES), with its names and the new ones; True if it did."""
        have: list[str] = []
        if self.server_cert.exists():
            have = pki.server_names(pki.load_cert(self.server_cert.read_bytes()))
            if set(names) <= set(have):
                return False
        self.issue_server(list(dict.fromkeys([*have, *names])), key_owner=key_owner)
        return True

    def issued(self) -> list[CertRecord]:
        if not self.index.exists():
            return []
        return [CertRecord(**r) for r in json.loads(self.index.read_text())]

    def _save(self, records: Iterable[CertRecord]) -> None:
        body = json.dumps([asdict(r) for r in records], indent=1, sort_keys=True)
        _write(self.index, body.encode())

    def issue(
        self,
        tenant: str,
        device_id: str,
        days: float = DEVICE_DAYS,
        not_before: dt.datetime | None = None,
    ) -> IssuedCert:
        """A key and certificate for the device; ``not_before`` in the past with a short
        ``days`` gives an already expired one (tests)."""
        ca = self.authority()
        key = pki.new_key()
        start = not_before or self._now()
        cert = pki.build_device(ca, key.public_key(), tenant, device_id, now=start, days=days)
        record = CertRecord(
            serial=f"{cert.serial_number:x}",
            tenant=tenant,
            device=device_id,
            username=pki.common_name(cert),
            fingerprint=pki.fingerprint(cert),
            not_before=cert.not_valid_before_utc.isoformat(),
            not_after=cert.not_valid_after_utc.isoformat(),
        )
        self._save([*self.issued(), record])
        return IssuedCert(record, pki.key_pem(key), pki.cert_pem(cert))

    def revoke(self, serials: Iterable[str]) -> list[CertRecord]:
        """Revoke these serials (hex) and rewrite the CRL; the newly revoked records.
        Mosquitto applies the CRL to new connections after a SIGHUP."""
        wanted = {s.lower().lstrip("0") or "0" for s in serials}
        records = self.issued()
        unknown = wanted - {r.serial for r in records}
        if unknown:
            raise NotFoundError(f"no issued certificate with serial {', '.join(sorted(unknown))}")
        at = self._now().isoformat()
        done: list[CertRecord] = []
        for i, rec in enumerate(records):
            if rec.serial in wanted and rec.revoked_at is None:
                records[i] = replace(rec, revoked_at=at)
                done.append(records[i])
        self._save(records)
        self.write_crl()
        return done

    def write_crl(self, days: float = CRL_DAYS) -> None:
        revoked = [
            pki.Revoked(int(r.serial, 16), dt.datetime.fromisoformat(r.revoked_at))
            for r in self.issued()
            if r.revoked_at is not None
        ]
        crl = pki.build_crl(self.authority(), revoked, now=self._now(), days=days)
        _write(self.crl, pki.cert_pem(crl))

    def listener_conf(self, port: int = 8883, bind: str | None = None) -> str:
        return pki.listener_conf(
            port,
            cafile=str(self.ca_cert.resolve()),
            certfile=str(self.server_cert.resolve()),
            keyfile=str(self.server_key.resolve()),
            crlfile=str(self.crl.resolve()),
            bind=bind,
        )
