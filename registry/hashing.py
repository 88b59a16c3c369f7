"""Secrets: generation, salted slow hashes, verification, certificate fingerprints (pure).

Hash: scrypt from the standard library (OpenSSL), memory-hard, no extra dependency. Cost
N=2**14, r=8, p=1 (16 MiB, measured 34 ms per verify on the 2-core build box, docs/security.md).
Every secret the registry issues is 256 random bits, so offline guessing is infeasible at any
hash cost; the slow salted hash is defence in depth for a leaked store, and the moderate cost
keeps the later HTTP service's per-connection verify cheap. Parameters travel with each hash
(``scrypt$ln=14,r=8,p=1$salt$hash``), so they can be raised later without breaking old hashes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Final

SECRET_BYTES: Final = 32  # 256 bits
SALT_BYTES: Final = 16
KEY_BYTES: Final = 32


@dataclass(frozen=True)
class ScryptParams:
    log2_n: int = 14
    r: int = 8
    p: int = 1

    @property
    def maxmem(self) -> int:
        # scrypt needs 128 * r * N bytes; leave headroom over OpenSSL's 32 MiB default cap.
        return 256 * self.r * (1 << self.log2_n) + 1024 * 1024


DEFAULT_PARAMS: Final = ScryptParams()
_HASH_RE: Final = re.compile(
    r"scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)"
)


def generate_secret() -> str:
    """A new random secret: 256 bits, URL-safe base64 (43 characters). Shown once."""
    return secrets.token_urlsafe(SECRET_BYTES)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(secret: str, salt: bytes, params: ScryptParams) -> bytes:
    return hashlib.scrypt(
        secret.encode(),
        salt=salt,
        n=1 << params.log2_n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem,
        dklen=KEY_BYTES,
    )


def hash_secret(secret: str, params: ScryptParams = DEFAULT_PARAMS) -> str:
    """The salted scrypt hash of ``secret`` in a self-describing string."""
    if not secret:
        raise ValueError("empty secret")
    salt = secrets.token_bytes(SALT_BYTES)
    key = _derive(secret, salt, params)
    return f"scrypt$ln={params.log2_n},r={params.r},p={params.p}${_b64(salt)}${_b64(key)}"


def parse_hash(encoded: str) -> tuple[ScryptParams, bytes, bytes]:
    m = _HASH_RE.fullmatch(encoded)
    if m is None:
        raise ValueError("not a registry scrypt hash")
    params = ScryptParams(int(m[1]), int(m[2]), int(m[3]))
    if not (10 <= params.log2_n <= 20 and 1 <= params.r <= 32 and 1 <= params.p <= 16):
        raise ValueError("scrypt parameters out of range")
    return params, _unb64(m[4]), _unb64(m[5])


def verify_secret(secret: str, encoded: str) -> bool:
    """True if ``secret`` matches ``encoded``; False for a mismatch or a malformed hash."""
    try:
        params, salt, key = parse_hash(encoded)
    except ValueError:
        return False
    return hmac.compare_digest(_derive(secret, salt, params), key)


@functools.cache
def _decoy() -> str:
    return hash_secret(generate_secret())


def verify_in_constant_time(secret: str, encoded: str | None) -> bool:
    """:func:`verify_secret`, but an unknown or disabled principal (``encoded`` None) costs a
    verify too, so response time does not tell which device ids exist."""
    if encoded is None:
        verify_secret(secret, _decoy())
        return False
    return verify_secret(secret, encoded)


def needs_rehash(encoded: str, params: ScryptParams = DEFAULT_PARAMS) -> bool:
    """True if ``encoded`` was made with other parameters than today's."""
    try:
        return parse_hash(encoded)[0] != params
    except ValueError:
        return True


_FINGERPRINT_RE: Final = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def normalise_fingerprint(text: str) -> str:
    """A certificate's SHA-256 fingerprint as ``sha256:<64 lower-case hex>``.

    Accepts the hex with or without colons (openssl prints ``AB:CD:...``) and the prefix.
    """
    compact = text.strip().lower().replace(":", "") if text else ""
    compact = compact.removeprefix("sha256")
    m = _FINGERPRINT_RE.fullmatch(compact)
    if m is None:
        raise ValueError(f"not a SHA-256 fingerprint: {text!r}")
    return f"sha256:{m[1]}"


def fingerprint_of_der(der: bytes) -> str:
    """The SHA-256 fingerprint of a DER-encoded certificate."""
    return f"sha256:{hashlib.sha256(der).hexdigest()}"
