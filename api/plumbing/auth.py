"""Authentication against the registry: service accounts (Basic) and api keys (Cambria HMAC,
bearer or Basic), and the registry writes of ``/apiKeys`` and topic metadata.

- Accounts: ``Authorization: Basic base64(account:secret)``; the account must be enabled, in an
  enabled tenant, and hold a role that may use the pub/sub API (``api``, ``operator``,
  ``admin``).
- Api keys (``/apiKeys``): Cambria HMAC within the clock window, ``Bearer <key>:<secret>``, or
  Basic with the key as user name; the key and its tenant must be enabled.
The registry is read from its compacted topic at start and followed by a consumer kept open;
before every decision the service reads up to the topic's end as Kafka reports it then (a read
barrier, registry.follower), so a change whose command has returned is acted on by the next
request: a new account gets in, a disabled one is refused (issue 37, docs/security.md "Read
your writes"). Concurrent requests share one barrier that started after they arrived. If Kafka
does not answer the barrier, the request is refused with 503 rather than decided on a stale
copy. scrypt checks run in a thread and a success is remembered (by a hash of the credentials,
never the secret) until the registry changes or a minute passes. Writes open the registry as
its single writer for one change, acting as the caller (so the registry checks its rights and
audits it by name).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from api.errors import SERVER_UNAV, SERVER_UNAVAILABLE, ApiError
from api.plumbing import cambria
from api.plumbing.access import Principal
from api.plumbing.outage_log import OutageLog
from appconfig.kafka_security import client_defaults
from kafka_watch.stall import StallJudge
from registry.errors import RegistryError
from registry.kafka_store import KafkaStore
from registry.model import ApiKey, Role, TopicAcl
from registry.permissions import Actor
from registry.service import Registry

log = logging.getLogger(__name__)
API_ROLES = frozenset({Role.API, Role.OPERATOR, Role.ADMIN})
_REMEMBER_S = 60.0
T = TypeVar("T")


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``Basic dXNlcjpwdw==`` -> ("user", "pw"); anything else -> None."""
    found = cambria.presented({"Authorization": header} if header else {})
    return (found.user, found.secret) if isinstance(found, cambria.Basic) else None


def load_master(path: str) -> bytes | None:
    """The key that derives api key secrets: made (0600, 256 bits) on first use; None = no
    file configured (api keys then work with bearer and Basic only if issued elsewhere)."""
    if not path:
        return None
    file = Path(path)
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
    return bytes.fromhex(file.read_text().strip())


def key_principal(key: ApiKey) -> Principal:
    return Principal(key.key, "apikey", (key.role,), key.tenant)


def account_principal(actor: Actor) -> Principal | None:
    """The pub/sub caller an authenticated registry account is, or None when its roles may not
    use the pub/sub API (iot-amqp's northbound links decide with it too)."""
    if not API_ROLES & set(actor.roles):
        return None
    return Principal(actor.name, "account", actor.roles, actor.tenant)


class RegistryAuthenticator:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        audit_topic: str = "iot.registry.audit",
        transactional_id: str = "iot-registry",
        master: bytes | None = None,
        window_s: float = 600.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stall_s: float = 30.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._stall_s = stall_s  # its registry follower's (registry.follower)
        self._topics = (topic, audit_topic, transactional_id)
        self._store = KafkaStore(
            bootstrap, topic, audit_topic, transactional_id, security=client_defaults()
        )
        self._registry: Registry | None = None
        self._remembered: dict[bytes, tuple[float, Principal]] = {}
        self._barrier = ReadBarrier(self._catch_up)
        self._outage = OutageLog(log, "registry not readable, refusing to decide on a stale copy")
        self._write_lock = asyncio.Lock()
        self.master = master
        self._window_s = window_s
        self._clock = clock

    async def start(self) -> None:
        def open_and_follow() -> Registry:
            registry = Registry.open(self._store, Actor("svc/iot-api", (Role.API,)))
            registry.follow(self._stall_s, "registry-follower")
            return registry

        self._registry = await asyncio.to_thread(open_and_follow)

    @property
    def registry(self) -> Registry:
        assert self._registry is not None, "start() first"
        return self._registry

    @property
    def follower_stall(self) -> StallJudge | None:
        """Its registry follower's stall judge (replacements, on /metrics), once started."""
        return self._registry.follower_stall if self._registry is not None else None

    async def _catch_up(self) -> None:
        try:
            changed = await asyncio.to_thread(self.registry.refresh)
        except RegistryError as exc:
            self._outage.failed(exc)  # once per outage, then a reminder every 30 s
            raise ApiError(
                503, SERVER_UNAVAILABLE, f"{SERVER_UNAV} The registry (Kafka) does not answer."
            ) from exc
        self._outage.answered()
        if changed:  # a disabled account or a rotated secret counts from now on
            self._remembered.clear()

    async def synced(self) -> None:
        """Return once every registry change committed before the call is applied (the read
        barrier); ApiError 503 if Kafka does not tell."""
        await self._barrier.wait()

    async def refreshed(self) -> Registry:
        """The registry with every change committed before the call applied (HTTP devices
        check their own credentials against it, api.http_devices.handlers)."""
        await self.synced()
        return self.registry

    # --- who is asking ---------------------------------------------------------------------

    async def authenticate(self, header: str | None) -> Actor | None:
        """Phase 1's Basic check of a registry account (kept for callers of that API)."""
        found = await self.principal({"Authorization": header} if header else {})
        if found is None or found.kind != "account":
            return None
        return Actor(found.name, found.roles, found.tenant)

    async def principal(self, headers: Mapping[str, str]) -> Principal | None:
        creds = cambria.presented(headers)
        if creds is None or self._registry is None:
            return None
        await self.synced()
        if isinstance(creds, cambria.Signed):
            return self._signed(creds)
        user = creds.key if isinstance(creds, cambria.Bearer) else creds.user
        digest = hashlib.sha256(f"{type(creds).__name__}\0{user}\0{creds.secret}".encode()).digest()
        now = time.monotonic()
        hit = self._remembered.get(digest)
        if hit is not None and now - hit[0] < _REMEMBER_S:
            return hit[1]
        found = await asyncio.to_thread(
            self._verify, user, creds.secret, isinstance(creds, cambria.Bearer)
        )
        if found is not None:
            self._remembered[digest] = (now, found)
        return found

    def _verify(self, user: str, secret: str, key_only: bool) -> Principal | None:
        if key_only or user in self.registry.state.api_keys:
            key = self.registry.authenticate_api_key(user, secret)
            return None if key is None else key_principal(key)
        actor = self.registry.authenticate_account(user, secret)
        return None if actor is None else account_principal(actor)

    def _signed(self, creds: cambria.Signed) -> Principal | None:
        key = self.registry.state.api_keys.get(creds.key)
        if key is None or self.master is None or key.disabled:
            return None
        tenant = self.registry.state.tenants.get(key.tenant)
        if tenant is None or tenant.disabled:
            return None
        if not cambria.within_window(creds.date, self._clock(), self._window_s):
            return None
        secret = cambria.derive_secret(self.master, key.key, key.salt)
        return key_principal(key) if cambria.signature_matches(secret, creds) else None

    # --- what the registry knows -----------------------------------------------------------

    def tenants(self) -> frozenset[str]:
        return frozenset(self.registry.state.tenants)

    def acls(self) -> dict[str, TopicAcl]:
        return self.registry.state.topic_acls

    def acl(self, topic: str) -> TopicAcl | None:
        return self.registry.state.topic_acls.get(topic)

    def api_keys(self) -> dict[str, ApiKey]:
        return self.registry.state.api_keys

    # --- changes (one writer session per change, acting as the caller) ---------------------

    async def write(self, who: Principal, change: Callable[[Registry], T]) -> T:
        """Run ``change`` on a writer registry acting as ``who``; the reader sees it at once."""

        def run() -> T:
            store = KafkaStore(self._bootstrap, *self._topics, security=client_defaults())
            try:
                name = f"apikey/{who.name}" if who.kind == "apikey" else who.name
                writer = Registry.open(store, Actor(name, who.roles, who.tenant), write=True)
                return change(writer)
            finally:
                store.close()

        async with self._write_lock:
            result = await asyncio.to_thread(run)
        await self.synced()
        return result

    def issue_secret(self, key: str, salt: str) -> str:
        """Derived from the master key (HMAC-capable), or random without one (bearer and
        Basic only: the service could not re-make it to check a signature)."""
        if self.master is None:
            return secrets.token_urlsafe(18)[: cambria.SECRET_LENGTH]
        return cambria.derive_secret(self.master, key, salt)

    def close(self) -> None:
        if self._registry is not None:
            self._registry.stop_following()
        self._store.close()


class ReadBarrier:
    """Runs ``catch_up`` for waiters, one run at a time, each waiter answered by a run that
    began after it arrived (so it covers every change committed before the waiter asked);
    waiters that arrive while a run is under way share the next one."""

    def __init__(self, catch_up: Callable[[], Awaitable[None]]) -> None:
        self._catch_up = catch_up
        self._next: asyncio.Future[None] | None = None
        self._running = False
        self._task: asyncio.Task[None] | None = None  # kept: the loop holds tasks weakly

    async def wait(self) -> None:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            if not self._running:
                self._running = True
                self._task = asyncio.get_running_loop().create_task(self._drive())
        await asyncio.shield(self._next)

    async def _drive(self) -> None:
        try:
            while self._next is not None:
                done, self._next = self._next, None
                try:
                    await self._catch_up()
                except Exception as exc:  # noqa: BLE001 - handed to every waiter of this run
                    done.set_exception(exc)
                    done.exception()  # retrieved: a waiter that left must not log it as lost
                else:
                    done.set_result(None)
        finally:
            self._running = False


def describe(key: ApiKey, **extra: Any) -> dict[str, Any]:
    """MR's ApiKeyBean view (never the secret), with our tenant and role."""
    return {
        "key": key.key,
        "aux": {"email": key.email, "description": key.description},
        "tenant": key.tenant,
        "role": str(key.role),
        "disabled": key.disabled,
        **extra,
    }
