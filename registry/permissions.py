"""Which actor may do what in the registry (pure).

The later HTTP service authenticates operators and programs as service accounts and asks
:func:`allowed` before every call. The local CLI acts with full rights (whoever can write the
registry's Kafka topic is an administrator: that is the trust boundary, docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from registry.model import Role

READ: Final = "read"
WRITE: Final = "write"
# (role) -> {(entity kind, access)} it grants; tenant scoping is checked separately.
_GRANTS: Final[dict[Role, frozenset[tuple[str, str]]]] = {
    Role.ADMIN: frozenset(
        (kind, access)
        for kind in ("tenant", "device", "account", "apikey", "topic")
        for access in (READ, WRITE)
    ),
    Role.OPERATOR: frozenset(
        {("tenant", READ), ("device", READ), ("device", WRITE), ("account", READ)}
        | {("apikey", READ), ("topic", READ), ("topic", WRITE)}
    ),
    Role.VIEWER: frozenset(
        {("tenant", READ), ("device", READ), ("account", READ), ("apikey", READ), ("topic", READ)}
    ),
    Role.TENANT_ADMIN: frozenset(
        {("tenant", READ), ("device", READ), ("device", WRITE), ("account", READ)}
        | {("apikey", READ), ("apikey", WRITE), ("topic", READ), ("topic", WRITE)}
    ),
    # authenticates HTTP devices; topic metadata: iot-api lets an owner key change its topic's
    # access lists (api.plumbing.access decides, the registry records)
    Role.API: frozenset({("tenant", READ), ("device", READ), ("topic", READ), ("topic", WRITE)}),
    Role.EDGE: frozenset({("device", READ)}),
}


@dataclass(frozen=True)
class Actor:
    """Who is asking: a name for the audit trail, roles, and a tenant (None: all tenants)."""

    name: str
    roles: tuple[Role, ...]
    tenant: str | None = None


def local_admin(user: str) -> Actor:
    return Actor(f"cli:{user}", (Role.ADMIN,))


def allowed(actor: Actor, kind: str, access: str, tenant: str | None) -> bool:
    """May ``actor`` ``access`` (read/write) an entity of ``kind`` in ``tenant``?

    ``tenant`` None is a system-wide entity (a system account, the tenant list)."""
    if actor.tenant is not None and tenant != actor.tenant:
        return False
    return any((kind, access) in _GRANTS.get(role, frozenset()) for role in actor.roles)
