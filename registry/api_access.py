"""The registry's HTTP api keys and topic metadata: iot-api's `/apiKeys` (Cambria keys whose
secret only the caller sees) and MR's topic owners and access lists."""

from __future__ import annotations

import dataclasses
from typing import Any

from registry import hashing
from registry.core import RegistryCore
from registry.errors import ConflictError, NotFoundError
from registry.model import ApiKey, Role, TopicAcl, bump
from registry.permissions import READ, WRITE


class AccessKeys(RegistryCore):
    """Api keys and topic ACLs (a base of :class:`registry.service.Registry`)."""

    def api_key(self, key: str) -> ApiKey:
        found = self.state.api_keys.get(key)
        if found is None:
            raise NotFoundError(f"no api key {key!r}")
        self._check("apikey", READ, found.tenant)
        return found

    def api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        return [
            k
            for _, k in sorted(self.state.api_keys.items())
            if (tenant is None or k.tenant == tenant) and self._may("apikey", READ, k.tenant)
        ]

    def create_api_key(
        self,
        key: str,
        tenant: str,
        role: Role,
        *,
        secret: str,
        salt: str,
        email: str = "",
        description: str = "",
    ) -> ApiKey:
        """Record a key whose secret the caller issued (only its hash and salt are kept)."""
        self._check("apikey", WRITE, tenant)
        if key in self.state.api_keys:
            raise ConflictError(f"api key {key!r} exists")
        self.tenant(tenant)
        now = self._now()
        made = ApiKey(
            key, tenant, role, salt, hashing.hash_secret(secret), email, description,
            created_at=now, updated_at=now,
        )  # fmt: skip
        detail = {"tenant": tenant, "role": str(role), "email": email}
        self._commit("apikey.create", put=[made], detail=detail)
        return made

    def update_api_key(self, key: str, **changes: Any) -> ApiKey:
        """Change ``email``, ``description`` or ``disabled`` of a key."""
        old = self._own_or_checked_key(key)
        new = bump(old, self._now(), **changes)
        self._commit("apikey.update", put=[new], detail=dict(changes))
        return new

    def delete_api_key(self, key: str) -> None:
        old = self._own_or_checked_key(key)
        self._commit("apikey.delete", delete=[old])

    def _own_or_checked_key(self, key: str) -> ApiKey:
        """A key may change or delete itself (MR's rule); anyone else needs the right."""
        found = self.state.api_keys.get(key)
        if found is None:
            raise NotFoundError(f"no api key {key!r}")
        if self.actor.name != f"apikey/{key}":
            self._check("apikey", WRITE, found.tenant)
        return found

    def authenticate_api_key(self, key: str, secret: str) -> ApiKey | None:
        """The enabled key of an enabled tenant whose secret is ``secret``, or None."""
        found = self.state.api_keys.get(key)
        usable = (
            found is not None and not found.disabled and not self._tenant_disabled(found.tenant)
        )
        stored = found.secret_hash if found is not None and usable else None
        return found if hashing.verify_in_constant_time(secret, stored) else None

    def topic_acl(self, topic: str) -> TopicAcl | None:
        return self.state.topic_acls.get(topic)

    def set_topic_acl(self, topic: str, tenant: str, **changes: Any) -> TopicAcl:
        """Create or change a topic's owner, description or access lists."""
        self._check("topic", WRITE, tenant)
        old = self.state.topic_acls.get(topic)
        now = self._now()
        if old is None:
            new = dataclasses.replace(
                TopicAcl(topic, tenant, created_at=now, updated_at=now), **changes
            )
        else:
            new = bump(old, now, **changes)
        detail = {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
        self._commit("topic.acl", put=[new], detail=detail)
        return new

    def delete_topic_acl(self, topic: str) -> None:
        old = self.state.topic_acls.get(topic)
        if old is None:
            return
        self._check("topic", WRITE, old.tenant)
        self._commit("topic.delete", delete=[old])
