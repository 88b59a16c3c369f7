"""An HTTP device's credentials, checked against the registry as iot-api reads it: at the
request's start (with a short memory of secrets verified a moment ago, since hashing is slow)
and again right before the request acts, so that a device disabled, deleted or re-keyed while
its request was in flight is refused from the moment that command returned (the read barrier:
docs/security.md "Read your writes")."""

from __future__ import annotations

import asyncio
import hashlib
import time

from api.http_devices.model import DeviceRef
from api.plumbing.auth import RegistryAuthenticator

_REMEMBER_S = 60.0


class DeviceCredentials:
    def __init__(self, auth: RegistryAuthenticator) -> None:
        self.auth = auth
        self._remembered: dict[bytes, tuple[float, str]] = {}

    async def verified(self, ref: DeviceRef, secret: str) -> str | None:
        """The secret hash ``secret`` was checked against, or None if refused."""
        registry = await self.auth.refreshed()
        stored = self.usable_hash(ref)
        if stored is None:
            return None
        digest = hashlib.sha256(f"{ref.username}\0{secret}".encode()).digest()
        hit = self._remembered.get(digest)
        now = time.monotonic()
        if hit is not None and now - hit[0] < _REMEMBER_S and hit[1] == stored:
            return stored  # the same secret verified against the same hash a moment ago
        ok = await asyncio.to_thread(registry.verify_device, ref.tenant, ref.device, secret)
        if not ok:
            return None
        self._remembered[digest] = (now, stored)
        return stored

    def usable_hash(self, ref: DeviceRef) -> str | None:
        """The device's secret hash if it exists and it and its tenant are enabled."""
        state = self.auth.registry.state
        device = state.devices.get((ref.tenant, ref.device))
        owner = state.tenants.get(ref.tenant)
        if device is None or device.disabled or owner is None or owner.disabled:
            return None
        return device.credentials.secret_hash or ""

    async def still_allowed(self, ref: DeviceRef, verified_hash: str | None) -> bool:
        """Whether the device may still act with the secret verified against
        ``verified_hash``, after reading the registry up to its end now."""
        await self.auth.synced()
        stored = self.usable_hash(ref)
        return stored is not None and stored == verified_hash
