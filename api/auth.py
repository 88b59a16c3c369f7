"""HTTP Basic auth against the registry's service accounts (phase 1 of issue 14's access control).

``Authorization: Basic base64(account:secret)``; the account must be enabled, in an enabled
tenant, and hold a role that may use the pub/sub API (``api``, ``operator`` or ``admin``).
The registry is read from its compacted topic and refreshed every few seconds; scrypt checks run
in a thread and a success is remembered (by a hash of the credentials, never the secret) until
the registry changes or a minute passes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import time

from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import Actor
from registry.service import Registry

log = logging.getLogger(__name__)
API_ROLES = frozenset({Role.API, Role.OPERATOR, Role.ADMIN})
_REMEMBER_S = 60.0
_REFRESH_S = 5.0


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``Basic dXNlcjpwdw==`` -> ("user", "pw"); anything else -> None."""
    if not header:
        return None
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, secret = decoded.partition(":")
    return (user, secret) if sep and user else None


class RegistryAuthenticator:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self._store = KafkaStore(bootstrap, topic)
        self._registry: Registry | None = None
        self._refreshed = 0.0
        self._remembered: dict[bytes, tuple[float, Actor]] = {}
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._registry = await asyncio.to_thread(
            Registry.open, self._store, Actor("svc/iot-api", (Role.API,))
        )
        self._refreshed = time.monotonic()

    async def authenticate(self, header: str | None) -> Actor | None:
        creds = basic_credentials(header)
        if creds is None or self._registry is None:
            return None
        digest = hashlib.sha256(f"{creds[0]}\0{creds[1]}".encode()).digest()
        now = time.monotonic()
        async with self._lock:
            if now - self._refreshed > _REFRESH_S:
                changed = await asyncio.to_thread(self._registry.refresh)
                self._refreshed = time.monotonic()
                if changed:  # a disabled account or a rotated secret counts from now on
                    self._remembered.clear()
        hit = self._remembered.get(digest)
        if hit is not None and now - hit[0] < _REMEMBER_S:
            return hit[1]
        actor = await asyncio.to_thread(self._registry.authenticate_account, *creds)
        if actor is None or not API_ROLES & set(actor.roles):
            return None
        self._remembered[digest] = (now, actor)
        return actor

    def close(self) -> None:
        self._store.close()
