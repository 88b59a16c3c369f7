"""What each operator role may do in the console (pure).

The registry's permissions decide registry changes (and are checked again there); this table
adds the console's own actions: commands, dead-letter replay, Kafka browsing, tenants.
A tenant's account sees its tenant's devices, commands and dead letters only: no raw Kafka
topics, which mix every tenant's records (pages.py scopes the dead letters).
"""

from __future__ import annotations

from typing import Final

from registry.model import Role
from registry.permissions import Actor

CONSOLE_ROLES: Final = frozenset({Role.ADMIN, Role.OPERATOR, Role.VIEWER, Role.TENANT_ADMIN})

VIEW_FLEET: Final = "view_fleet"
VIEW_KAFKA: Final = "view_kafka"  # topics, records
VIEW_DLQ: Final = "view_dlq"  # dead letters (a tenant's account: its own)
SEND_COMMANDS: Final = "send_commands"
MANAGE_DEVICES: Final = "manage_devices"
REPLAY_DLQ: Final = "replay_dlq"
VIEW_TENANTS: Final = "view_tenants"

_GRANTS: Final[dict[Role, frozenset[str]]] = {
    Role.ADMIN: frozenset(
        {VIEW_FLEET, VIEW_KAFKA, VIEW_DLQ, SEND_COMMANDS, MANAGE_DEVICES, REPLAY_DLQ, VIEW_TENANTS}
    ),
    Role.OPERATOR: frozenset(
        {VIEW_FLEET, VIEW_KAFKA, VIEW_DLQ, SEND_COMMANDS, MANAGE_DEVICES, REPLAY_DLQ}
    ),
    Role.VIEWER: frozenset({VIEW_FLEET, VIEW_KAFKA, VIEW_DLQ}),
    Role.TENANT_ADMIN: frozenset({VIEW_FLEET, VIEW_DLQ, SEND_COMMANDS, MANAGE_DEVICES, REPLAY_DLQ}),
}


def may_log_in(actor: Actor) -> bool:
    return bool(CONSOLE_ROLES & set(actor.roles))


def capabilities(actor: Actor) -> frozenset[str]:
    found: set[str] = set()
    for role in actor.roles:
        found |= _GRANTS.get(role, frozenset())
    if actor.tenant is not None:  # a tenant's account never sees across tenants
        found -= {VIEW_KAFKA, VIEW_TENANTS}
    return frozenset(found)


def may(actor: Actor, capability: str) -> bool:
    return capability in capabilities(actor)
