"""Operators and the registry for the console: logging in with a registry account, and device
and tenant changes made as the logged-in operator (the registry checks their rights again).

Reads share one registry copy, refreshed every few seconds. A change opens the registry as
its single writer for that one change and lets go after: the registry has one writer at a
time (Kafka fences the previous one), and the `iot-devices` CLI must keep working beside us.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from api.console.roles import may_log_in
from registry.dynsec import DynsecClient
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import Actor
from registry.service import Registry
from registry.topics import ADMIN_USERNAME

T = TypeVar("T")
_REFRESH_S = 3.0


class Operators:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        mqtt_host: str,
        mqtt_port: int,
        admin_password_file: str,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.mqtt_host = mqtt_host
        self.mqtt_port = mqtt_port
        self.password_file = Path(admin_password_file) if admin_password_file else None
        self._store: KafkaStore | None = None
        self.registry: Registry | None = None
        self._refreshed = 0.0
        self._lock = threading.Lock()  # the shared copy is read and refreshed from threads
        self._write_lock = threading.Lock()

    def start(self) -> None:
        self._store = KafkaStore(self.bootstrap, self.topic)
        self.registry = Registry.open(self._store, Actor("svc/iot-console", (Role.VIEWER,)))
        self._refreshed = time.monotonic()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def refresh(self, force: bool = False) -> None:
        assert self.registry is not None, "start() first"
        with self._lock:
            if force or time.monotonic() - self._refreshed > _REFRESH_S:
                self.registry.refresh()
                self._refreshed = time.monotonic()

    def login(self, name: str, secret: str) -> Actor | None:
        """The operator behind a registry account name and secret; None if refused."""
        self.refresh()
        assert self.registry is not None
        with self._lock:
            actor = self.registry.authenticate_account(name, secret)
        return actor if actor is not None and may_log_in(actor) else None

    def still_valid(self, actor: Actor) -> bool:
        """The account still exists, is enabled and has the same roles."""
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
            store = KafkaStore(self.bootstrap, self.topic)
            mosquitto = None
            try:
                if self.password_file is not None:
                    password = self.password_file.read_text().strip()
                    mosquitto = DynsecClient(
                        self.mqtt_host, self.mqtt_port, ADMIN_USERNAME, password
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
