"""The registry's state, rebuilt from the compacted topic's records (pure).

Keys: ``tenant/{id}``, ``device/{tenant}/{id}``, ``account/{name}``, ``apikey/{key}``,
``topicacl/{topic}``. Values: model JSON;
a tombstone (None) deletes. Records are applied in topic order (one partition); a record
that does not decode is counted in ``skipped`` and ignored rather than stopping the load.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, field

from registry import model
from registry.model import ApiKey, Device, Entity, ServiceAccount, Tenant, TopicAcl

log = logging.getLogger(__name__)


def entity_key(entity: Entity) -> str:
    if isinstance(entity, Tenant):
        return f"tenant/{entity.id}"
    if isinstance(entity, Device):
        return f"device/{entity.tenant}/{entity.id}"
    if isinstance(entity, ApiKey):
        return f"apikey/{entity.key}"
    if isinstance(entity, TopicAcl):
        return f"topicacl/{entity.topic}"
    return f"account/{entity.name}"


def encode(entity: Entity) -> tuple[bytes, bytes]:
    """(Kafka key, value) of an entity."""
    value = json.dumps(model.to_json(entity), sort_keys=True, separators=(",", ":"))
    return entity_key(entity).encode(), value.encode()


_VERSIONS = itertools.count(1)


@dataclass
class RegistryState:
    tenants: dict[str, Tenant] = field(default_factory=dict)
    devices: dict[tuple[str, str], Device] = field(default_factory=dict)
    accounts: dict[str, ServiceAccount] = field(default_factory=dict)
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    topic_acls: dict[str, TopicAcl] = field(default_factory=dict)
    skipped: int = 0
    # changes with every tenant put or removed, unique across states: readers that derive
    # something from every tenant (the doors' msgs/s quotas) do it again only then
    tenants_version: int = field(default_factory=lambda: next(_VERSIONS), compare=False)

    def apply(self, key: bytes | str, value: bytes | None) -> None:
        """Apply one record of the topic (a tombstone when ``value`` is None)."""
        text = key.decode() if isinstance(key, bytes) else key
        kind, _, rest = text.partition("/")
        if value is None:
            self._delete(kind, rest)
            return
        try:
            entity = model.from_json(json.loads(value))
            if entity_key(entity) != text:
                raise model.ModelError(f"key {text!r} does not match its value")
        except (ValueError, TypeError) as exc:
            self.skipped += 1
            log.warning("registry record %s skipped: %s", text, exc)
            return
        self.put(entity)

    def put(self, entity: Entity) -> None:
        if isinstance(entity, Tenant):
            self.tenants[entity.id] = entity
            self.tenants_version = next(_VERSIONS)
        elif isinstance(entity, Device):
            self.devices[(entity.tenant, entity.id)] = entity
        elif isinstance(entity, ApiKey):
            self.api_keys[entity.key] = entity
        elif isinstance(entity, TopicAcl):
            self.topic_acls[entity.topic] = entity
        else:
            self.accounts[entity.name] = entity

    def remove(self, entity: Entity) -> None:
        self._delete(*entity_key(entity).split("/", 1))

    def _delete(self, kind: str, rest: str) -> None:
        if kind == "tenant":
            self.tenants.pop(rest, None)
            self.tenants_version = next(_VERSIONS)
        elif kind == "device":
            tenant, _, device = rest.partition("/")
            self.devices.pop((tenant, device), None)
        elif kind == "account":
            self.accounts.pop(rest, None)
        elif kind == "apikey":
            self.api_keys.pop(rest, None)
        elif kind == "topicacl":
            self.topic_acls.pop(rest, None)

    def devices_of(self, tenant: str) -> list[Device]:
        return [d for (t, _), d in sorted(self.devices.items()) if t == tenant]

    def group_members(self, tenant: str, group: str) -> list[Device]:
        return [d for d in self.devices_of(tenant) if group in d.groups]


def rebuild(records: list[tuple[bytes, bytes | None]]) -> RegistryState:
    state = RegistryState()
    for key, value in records:
        state.apply(key, value)
    return state
