"""The bridge's view of the tenants: their Kafka topics and their message-rate quotas.

A thread of its own (every call here blocks on Kafka), never the event loop:

- reads the registry's compacted topic (``registry_topic``, e.g. ``iot.registry``) from where it
  last stopped, every ``tenant_refresh_s``: the tenants and their ``msgs_per_s`` quotas (the
  registry's quota wins over the static ``tenant_quotas`` setting for a tenant it knows);
- makes sure each tenant's Kafka topics exist (``iot.{t}.telemetry``, ``.events``, ``.dlq``,
  ``.presence``; created with the default tenant's partition count, presence compacted) before
  the pipeline writes to them: for every tenant of the registry, and at once for a tenant the
  pipeline saw and asks for (:meth:`TenantWatch.request`);
- hands the result to the pipeline through ``publish(ready_tenants, rates)``, which the caller
  makes thread-safe (``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from bridge.mapping import Topics, tenant_topics
from bridge.topics import DEFAULT_TENANT
from registry.errors import RegistryError
from registry.kafka_store import KafkaStore
from registry.state import RegistryState

__all__ = ["TenantWatch"]

log = logging.getLogger(__name__)

Publish = Callable[[frozenset[str], dict[str, float | None]], object]


class TenantWatch:
    def __init__(
        self,
        *,
        bootstrap: str,
        base: Topics,
        static_rates: Mapping[str, float],
        registry_topic: str,
        refresh_s: float,
        publish: Publish,
        admin_config: Mapping[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.base = base
        self.static_rates = dict(static_rates)
        self.registry_topic = registry_topic
        self.refresh_s = refresh_s
        self.publish = publish
        self._admin_config = {"bootstrap.servers": bootstrap, **(admin_config or {})}
        self._state = RegistryState()
        self._position: dict[int, int] | None = None
        self._ready: set[str] = {DEFAULT_TENANT}
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    # --- any thread ---------------------------------------------------------------------------

    def request(self, tenant: str) -> None:
        """The pipeline met ``tenant`` before its topics were checked: check them now."""
        with self._lock:
            self._wanted.add(tenant)
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tenant-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the watcher's thread -----------------------------------------------------------------

    def refresh(self) -> None:
        """One round: registry, topics, publish (also called once before the bridge starts)."""
        registry_tenants = self._read_registry()
        with self._lock:
            wanted, self._wanted = self._wanted, set()
        missing = (set(registry_tenants) | wanted) - self._ready
        if missing:
            self._ready |= self._ensure_topics(sorted(missing))
            with self._lock:  # a tenant whose topics could not be made: try again next round
                self._wanted |= wanted - self._ready
        rates: dict[str, float | None] = dict(self.static_rates)
        rates.update(registry_tenants)
        self.publish(frozenset(self._ready), rates)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.refresh_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except Exception:  # keep watching: the next round retries
                self.errors += 1
                log.exception("tenant refresh failed; retrying in %.1f s", self.refresh_s)

    def _read_registry(self) -> dict[str, float | None]:
        """Tenant -> msgs/s quota (None = unlimited) of every enabled registry tenant."""
        if not self.registry_topic:
            return {}
        security = {k: v for k, v in self._admin_config.items() if k != "bootstrap.servers"}
        store = KafkaStore(self.bootstrap, topic=self.registry_topic, security=security)
        try:
            records, self._position = store.read_since(self._position)
        except (KafkaException, RegistryError) as exc:  # StoreError: `iot-devices init` not run
            self.errors += 1
            log.error("cannot read the registry topic %s: %s", self.registry_topic, exc)
            return self._rates_of(self._state)
        for key, value in records:
            self._state.apply(key, value)
        return self._rates_of(self._state)

    @staticmethod
    def _rates_of(state: RegistryState) -> dict[str, float | None]:
        return {t.id: t.quotas.msgs_per_s for t in state.tenants.values() if not t.disabled}

    def _ensure_topics(self, tenants: Iterable[str]) -> set[str]:
        """Create what is missing of each tenant's topics; the tenants whose topics all exist."""
        admin = AdminClient(dict(self._admin_config))
        meta = admin.list_topics(timeout=10)
        existing = meta.topics
        specs: list[NewTopic] = []
        owners: dict[str, str] = {}
        for tenant in tenants:
            for base, name in zip(
                self.base.all(), tenant_topics(self.base, tenant).all(), strict=True
            ):
                if name in existing:
                    continue
                base_md = existing.get(base)
                partitions = len(base_md.partitions) if base_md is not None else 1
                config = {"cleanup.policy": "compact"} if base == self.base.presence else {}
                specs.append(NewTopic(name, max(1, partitions), config=config))
                owners[name] = tenant
        failed: set[str] = set()
        if specs:
            for name, future in admin.create_topics(specs, operation_timeout=10).items():
                try:
                    future.result(timeout=15)
                    log.info("created Kafka topic %s for tenant %s", name, owners[name])
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        self.errors += 1
                        failed.add(owners[name])
                        log.error("cannot create Kafka topic %s: %s", name, exc.args[0])
        return {t for t in tenants if t not in failed}
