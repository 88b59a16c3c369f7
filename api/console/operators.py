"""Operators and the registry for the console: logging in with a registry account, and device
and tenant changes made as the logged-in operator (the registry checks their rights again).

Reads share one registry copy, followed by a consumer kept open; every log-in, session check
and read first reads up to the registry topic's end as Kafka reports it then (the read barrier,
registry.follower), so an account created, disabled or re-keyed by a command that returned is
acted on by the next request (docs/security.md "Read your writes"). A change opens the registry
as its single writer for that one change and lets go after: the registry has one writer at a
time (Kafka fences the previous one), and the `iot-devices` CLI must keep working beside us.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from api.console.roles import may_log_in
from appconfig.kafka_security import client_defaults
from kafka_watch.stall import StallJudge
from registry.dynsec import admin_client, parse_ports
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import Actor
from registry.service import Registry
from registry.topics import ADMIN_USERNAME

T = TypeVar("T")


class Operators:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        mqtt_host: str,
        mqtt_port: int,
        admin_password_file: str,
        *,
        shard_ports: str = "",
        stall_s: float = 30.0,
    ) -> None:
        self._stall_s = stall_s  # its registry follower's (registry.follower)
        self.bootstrap = bootstrap
        # `iot-stack up --mqtt-shards N`: changes go to each shard on its own port
        self.shard_ports = parse_ports(shard_ports)
        self.topic = topic
        self.mqtt_host = mqtt_host
        self.mqtt_port = mqtt_port
        self.password_file = Path(admin_password_file) if admin_password_file else None
        self._store: KafkaStore | None = None
        self.registry: Registry | None = None
        self._lock = threading.Lock()  # the shared copy is read and refreshed from threads
        self._write_lock = threading.Lock()

    def start(self) -> None:
        self._store = KafkaStore(self.bootstrap, self.topic, security=client_defaults())
        self.registry = Registry.open(self._store, Actor("svc/iot-console", (Role.VIEWER,)))
        self.registry.follow(self._stall_s, "console-registry-follower")

    @property
    def follower_stall(self) -> StallJudge | None:
        """Its registry follower's stall judge (replacements, on /metrics), once started."""
        return self.registry.follower_stall if self.registry is not None else None

    def close(self) -> None:
        if self.registry is not None:
            self.registry.stop_following()
        if self._store is not None:
            self._store.close()

    def refresh(self, force: bool = False) -> None:
        """Apply every change committed before the call. While Kafka does not answer, what
        the follower fetched before is used (no change can be committed then, and the
        console must still show that Kafka is down: registry.follower). ``force`` is kept for
        callers; every call reads to the end now."""
        assert self.registry is not None, "start() first"
        with self._lock:
            self.registry.refresh(strict=False)

    def login(self, name: str, secret: str) -> Actor | None:
        """The operator behind a registry account name and secret; None if refused."""
        self.refresh()
        assert self.registry is not None
        with self._lock:
            actor = self.registry.authenticate_account(name, secret)
        return actor if actor is not None and may_log_in(actor) else None

    def still_valid(self, actor: Actor) -> bool:
        """The account still exists, is enabled and has the same roles (as of now: the
        registry is read to its end first)."""
        self.refresh()
        assert self.registry is not None
        name = actor.name.removeprefix("svc/")
        with self._lock:
            account = self.registry.state.accounts.get(name)
            tenant_off = self.registry._tenant_disabled(account.tenant) if account else True
        return (
            account is not None
            and not account.disabled
            and not tenant_off
            and account.roles == actor.roles
        )

    def read(self, actor: Actor, what: Callable[[Registry], T]) -> T:
        """Run a read as ``actor`` (its tenant scoping and rights apply) on the shared copy."""
        self.refresh()
        assert self.registry is not None
        with self._lock:
            view = Registry(self.registry.store, actor)
            view.state = self.registry.state
            return what(view)

    def write(self, actor: Actor, change: Callable[[Registry], T]) -> T:
        """Run a change as ``actor`` through a writer opened for it alone."""
        with self._write_lock:
            store = KafkaStore(self.bootstrap, self.topic, security=client_defaults())
            mosquitto = None
            try:
                if self.password_file is not None:
                    password = self.password_file.read_text().strip()
                    mosquitto = admin_client(
                        self.mqtt_host, self.mqtt_port, ADMIN_USERNAME, password, self.shard_ports
                    ).start()
                registry = Registry.open(store, actor, mosquitto, write=True)
                result = change(registry)
            finally:
                if mosquitto is not None:
                    mosquitto.close()
                store.close()
        self.refresh(force=True)
        return result

    async def aread(self, actor: Actor, what: Callable[[Registry], T]) -> T:
        return await asyncio.to_thread(self.read, actor, what)

    async def awrite(self, actor: Actor, change: Callable[[Registry], T]) -> T:
        return await asyncio.to_thread(self.write, actor, change)
