"""The registry service's core: its state as read from the Kafka store, the actor's rights
checked on every call, and the one path of every change (entity + audit records committed to
Kafka in one transaction, then the in-memory state, then Mosquitto). See `registry.service`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_watch.stall import StallJudge
from registry import dynsec_plan as plan
from registry.audit import AuditRecord
from registry.dynsec import DynsecClient, DynsecError
from registry.errors import ForbiddenError, MosquittoOutOfStepError, NotFoundError
from registry.follower import RegistryFollower
from registry.kafka_store import KafkaStore
from registry.model import Entity, Tenant
from registry.permissions import READ, WRITE, Actor, allowed
from registry.state import RegistryState, encode, entity_key, rebuild


@dataclass(frozen=True)
class Issued:
    """A created or re-keyed entity and its new secret, shown once and never stored."""

    entity: Entity
    secret: str | None


class RegistryCore:
    def __init__(
        self,
        store: KafkaStore,
        actor: Actor,
        mosquitto: DynsecClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.actor = actor
        self.mosquitto = mosquitto
        self._clock = clock
        self.state = RegistryState()
        self.writer = False
        self._position: dict[int, int] | None = None
        self._follower: RegistryFollower | None = None

    def reload(self) -> None:
        records, self._position = self.store.read_since(None)
        self.state = rebuild(records)

    def follow(self, stall_s: float = 30.0, name: str = "registry-follower") -> None:
        """Keep a consumer open from here on: :meth:`refresh` then reads up to the topic's end
        as Kafka reports it at the call (a read barrier, registry.follower), cheaply; one that
        stalls for ``stall_s`` is replaced (counted by :attr:`follower_stall`, as ``name``)."""
        if self._follower is None:
            follower = RegistryFollower(
                self.store.bootstrap, self.store.topic, security=self.store.security,
                stall_s=stall_s, name=name,
            )  # fmt: skip
            follower.start(self._position or {})
            self._follower = follower

    def refresh(self, strict: bool = True) -> int:
        """Apply what other writers committed since the last read; returns the record count.
        After :meth:`follow`, every change committed before the call is applied when it
        returns, or a StoreError says Kafka did not tell (``strict=False``: what the follower
        has fetched is applied instead, registry.follower)."""
        if self._follower is not None:
            records = self._follower.catch_up(strict)
            self._position = self._follower.position
        else:
            records, self._position = self.store.read_since(self._position)
        for key, value in records:
            self.state.apply(key, value)
        return len(records)

    @property
    def follower_stall(self) -> StallJudge | None:
        """The follower's stall judge (its renewals), once :meth:`follow` was called."""
        return self._follower.stall if self._follower is not None else None

    def stop_following(self) -> None:
        if self._follower is not None:
            self._follower.close()
            self._follower = None

    def _now(self) -> int:
        return int(self._clock() * 1000)

    # --- plumbing ------------------------------------------------------------------------------

    def _check(self, kind: str, access: str, tenant: str | None) -> None:
        if allowed(self.actor, kind, access, tenant):
            return
        scope = tenant or "system"
        if access == WRITE and self.writer:  # a refused change is on the audit trail too
            denied = AuditRecord(
                self._now(), self.actor.name, f"{kind}.{access}", f"{kind}/{scope}", "denied"
            )
            self.store.commit([], [denied])
        raise ForbiddenError(f"{self.actor.name} may not {access} {kind}s of {scope}")

    def _commit(
        self,
        action: str,
        put: Sequence[Entity] = (),
        delete: Sequence[Entity] = (),
        commands: Sequence[plan.Command] = (),
        detail: dict[str, Any] | None = None,
        *,
        deferred: list[plan.Command] | None = None,
    ) -> None:
        records: list[tuple[bytes, bytes | None]] = [encode(e) for e in put]
        records += [(entity_key(e).encode(), None) for e in delete]
        now = self._now()
        audits = [
            AuditRecord(now, self.actor.name, action, entity_key(e), detail=detail or {})
            for e in (*put, *delete)
        ]
        self.store.commit(records, audits)
        for e in put:
            self.state.put(e)
        for e in delete:
            self.state.remove(e)
        if deferred is not None:  # the caller brings Mosquitto in step (a stopped one's file)
            deferred.extend(commands)
        elif self.mosquitto is not None and commands:
            try:
                self.mosquitto.call(commands)
            except DynsecError as exc:
                raise MosquittoOutOfStepError(
                    f"{action} saved in the registry, but Mosquitto was not updated ({exc}): "
                    "run `iot-devices mosquitto sync`, then rotate any secret this issued"
                ) from exc

    # --- reads every part shares ------------------------------------------------------------

    def tenant(self, tenant_id: str) -> Tenant:
        self._check("tenant", READ, tenant_id)
        found = self.state.tenants.get(tenant_id)
        if found is None:
            raise NotFoundError(f"no tenant {tenant_id!r}")
        return found

    def _may(self, kind: str, access: str, tenant: str | None) -> bool:
        return allowed(self.actor, kind, access, tenant)

    def _tenant_disabled(self, tenant_id: str | None) -> bool:
        """True if ``tenant_id`` names a tenant that is disabled or gone (None: system)."""
        if tenant_id is None:
            return False
        owner = self.state.tenants.get(tenant_id)
        return owner is None or owner.disabled
