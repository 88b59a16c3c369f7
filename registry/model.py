"""Registry entities: tenants, devices, service accounts, and their JSON form (pure).

Every entity carries ``version`` (1 on creation, +1 per change) and times in epoch ms. The
JSON form is the value stored on the compacted Kafka topic (see state.py for the keys).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from registry import ids
from registry.errors import RegistryError

RESERVED_TENANTS = frozenset({"svc"})  # "svc/<name>" is a service account's MQTT user name
RESERVED_ACCOUNTS = frozenset({"registry"})  # the registry's own Mosquitto admin client


class ModelError(RegistryError, ValueError):
    """An entity that breaks a registry rule."""


class Role(StrEnum):
    # Service roles: what a program may do on MQTT (acl.py) and in the registry.
    BRIDGE = "bridge"
    COMMANDS = "commands"
    EDGE = "edge"
    API = "api"
    # Operator roles: what a person may do through the registry (permissions.py).
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"
    TENANT_ADMIN = "tenant-admin"


SYSTEM_ONLY_ROLES = frozenset({Role.BRIDGE, Role.COMMANDS, Role.ADMIN})
TENANT_ONLY_ROLES = frozenset({Role.EDGE, Role.TENANT_ADMIN})
MQTT_ROLES = frozenset({Role.BRIDGE, Role.COMMANDS, Role.EDGE, Role.API})


@dataclass(frozen=True)
class Quotas:
    """Limits per tenant; None = unlimited. Enforced by the next phase (bridge, registry)."""

    devices: int | None = None
    msgs_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.devices is not None and self.devices < 0:
            raise ModelError("devices quota must be >= 0")
        if self.msgs_per_s is not None and self.msgs_per_s <= 0:
            raise ModelError("msgs/s quota must be > 0")


@dataclass(frozen=True)
class Tenant:
    id: str
    quotas: Quotas = Quotas()
    disabled: bool = False
    version: int = 1
    created_at: int = 0
    updated_at: int = 0

    def __post_init__(self) -> None:
        ids.tenant_id(self.id)
        if self.id in RESERVED_TENANTS:
            raise ModelError(f"tenant id {self.id!r} is reserved")


@dataclass(frozen=True)
class Credentials:
    """How a device or account proves who it is: a secret (stored as hash only) and/or a
    client certificate's SHA-256 fingerprint."""

    secret_hash: str | None = None
    cert_fingerprint: str | None = None

    @property
    def kinds(self) -> list[str]:
        return [k for k, v in (("secret", self.secret_hash), ("cert", self.cert_fingerprint)) if v]


@dataclass(frozen=True)
class Device:
    tenant: str
    id: str
    groups: tuple[str, ...] = ()
    disabled: bool = False
    credentials: Credentials = Credentials()
    version: int = 1
    created_at: int = 0
    updated_at: int = 0
    # The edge site (an ``edge`` account of the same tenant) the device is behind; None = it
    # talks to the central broker itself. Only its site may publish and receive for it.
    site: str | None = None

    def __post_init__(self) -> None:
        ids.tenant_id(self.tenant)
        ids.device_id(self.id)
        if self.site is not None:
            ids.account_name(self.site)
        for group in self.groups:
            ids.group_name(group)
        if len(set(self.groups)) != len(self.groups):
            raise ModelError("duplicate group")
        if not self.credentials.kinds:
            raise ModelError("a device needs a secret or a certificate")

    @property
    def key(self) -> str:
        return ids.device_key(self.tenant, self.id)


@dataclass(frozen=True)
class ServiceAccount:
    """A program (bridge, command path, edge site, HTTP service) or an operator.

    ``tenant`` None means system-wide; roles decide which is allowed (SYSTEM_ONLY_ROLES,
    TENANT_ONLY_ROLES)."""

    name: str
    roles: tuple[Role, ...]
    tenant: str | None = None
    disabled: bool = False
    credentials: Credentials = Credentials()
    version: int = 1
    created_at: int = 0
    updated_at: int = 0

    def __post_init__(self) -> None:
        ids.account_name(self.name)
        if self.name in RESERVED_ACCOUNTS:
            raise ModelError(f"account name {self.name!r} is reserved")
        if not self.roles:
            raise ModelError("an account needs at least one role")
        roles = set(self.roles)
        if self.tenant is not None:
            ids.tenant_id(self.tenant)
            bad = sorted(roles & SYSTEM_ONLY_ROLES)
            if bad:
                raise ModelError(f"role(s) {', '.join(bad)} are system-wide: no tenant")
        else:
            bad = sorted(roles & TENANT_ONLY_ROLES)
            if bad:
                raise ModelError(f"role(s) {', '.join(bad)} need a tenant")
        if not self.credentials.kinds:
            raise ModelError("an account needs a secret or a certificate")


API_KEY_ROLES = frozenset({Role.API, Role.VIEWER, Role.OPERATOR, Role.TENANT_ADMIN})
API_KEY_RE: Final = re.compile(r"[A-Za-z0-9]{16}")
TOPIC_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True)
class ApiKey:
    """An HTTP API key (DMaaP MR's ``/apiKeys``), scoped to one tenant and one role.

    The secret is never stored: ``secret_hash`` is its scrypt hash (bearer and Basic checks)
    and ``salt`` lets the HTTP service re-derive it from its master key for Cambria HMAC
    signatures (an HMAC check needs the secret itself, see docs/api.md)."""

    key: str
    tenant: str
    role: Role
    salt: str
    secret_hash: str
    email: str = ""
    description: str = ""
    disabled: bool = False
    version: int = 1
    created_at: int = 0
    updated_at: int = 0

    def __post_init__(self) -> None:
        if API_KEY_RE.fullmatch(self.key) is None:
            raise ModelError(f"invalid api key id {self.key!r}: 16 letters or digits")
        ids.tenant_id(self.tenant)
        if self.role not in API_KEY_ROLES:
            raise ModelError(f"role {self.role} is not for api keys")
        if not (self.salt and self.secret_hash):
            raise ModelError("an api key needs a salt and a secret hash")


@dataclass(frozen=True)
class TopicAcl:
    """MR's topic metadata: owner (an api key, or "" = open), description and the producer /
    consumer access lists (api keys; an empty list leaves that access open to the tenant)."""

    topic: str
    tenant: str
    owner: str = ""
    description: str = ""
    writers: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()
    version: int = 1
    created_at: int = 0
    updated_at: int = 0

    def __post_init__(self) -> None:
        if TOPIC_RE.fullmatch(self.topic) is None:
            raise ModelError(f"invalid topic name {self.topic!r}")
        ids.tenant_id(self.tenant)


Entity = Tenant | Device | ServiceAccount | ApiKey | TopicAcl


def bump(entity: Any, now_ms: int, **changes: Any) -> Any:
    """A changed copy of ``entity`` with its version + 1 and ``updated_at`` = now."""
    return dataclasses.replace(entity, version=entity.version + 1, updated_at=now_ms, **changes)


def to_json(entity: Entity) -> dict[str, Any]:
    data = dataclasses.asdict(entity)
    if isinstance(entity, Tenant):
        data["kind"] = "tenant"
    elif isinstance(entity, Device):
        data["kind"] = "device"
        data["groups"] = list(entity.groups)
    elif isinstance(entity, ApiKey):
        data["kind"] = "apikey"
        data["role"] = str(entity.role)
    elif isinstance(entity, TopicAcl):
        data["kind"] = "topicacl"
        data["writers"], data["readers"] = list(entity.writers), list(entity.readers)
    else:
        data["kind"] = "account"
        data["roles"] = [str(r) for r in entity.roles]
    return data


def from_json(data: dict[str, Any]) -> Entity:
    """The entity of :func:`to_json`'s dict; ModelError/InvalidIdError if it breaks a rule."""
    body = {k: v for k, v in data.items() if k != "kind"}
    kind = data.get("kind")
    try:
        if kind == "tenant":
            body["quotas"] = Quotas(**body.get("quotas", {}))
            return Tenant(**body)
        if kind == "apikey":
            body["role"] = Role(str(body.get("role")))
            return ApiKey(**body)
        if kind == "topicacl":
            body["writers"] = tuple(body.get("writers", ()))
            body["readers"] = tuple(body.get("readers", ()))
            return TopicAcl(**body)
        body["credentials"] = Credentials(**body.get("credentials", {}))
        if kind == "device":
            body["groups"] = tuple(body.get("groups", ()))
            return Device(**body)
        if kind == "account":
            body["roles"] = tuple(Role(r) for r in body.get("roles", ()))
            return ServiceAccount(**body)
    except TypeError as exc:  # unknown or missing fields
        raise ModelError(f"malformed {kind} record: {exc}") from exc
    raise ModelError(f"unknown entity kind {kind!r}")


def public_view(entity: Entity) -> dict[str, Any]:
    """The JSON form without secret hashes (for listings and audit records)."""
    data = to_json(entity)
    if isinstance(entity, ApiKey):
        del data["secret_hash"], data["salt"]
        return data
    creds = data.pop("credentials", None)
    if creds is not None:
        data["credentials"] = {
            "kinds": entity.credentials.kinds,  # type: ignore[union-attr]
            "cert_fingerprint": creds["cert_fingerprint"],
        }
    return data
