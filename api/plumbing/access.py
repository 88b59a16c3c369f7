"""Who may reach which topic through iot-api (pure): tenant scoping, then MR's topic ACLs.

Topic naming (shared with the bridge's per-tenant topics): a non-default tenant ``t`` owns every
topic named ``iot.{t}.<rest>`` (``iot.acme.telemetry``); every other topic belongs to the
default tenant, except the system topics (the registry's, Kafka's ``__`` internals), which no
HTTP caller reads or writes. A tenant is recognised only if the registry knows it, so
``iot.commands.dlq`` stays the default tenant's unless a tenant ``commands`` exists.

Decisions, in order:
1. a system topic: refused to everyone;
2. a caller bound to a tenant reaches only that tenant's topics (system-wide callers, the
   registry's admin and operator accounts, reach every tenant's);
3. the topic's access list (MR's writerAcl / readerAcl, kept in the registry): an empty list
   leaves the access open within the tenant; a non-empty one admits its keys, the topic's
   owner and callers with an administrating role;
4. changing a topic (create, delete, its ACLs) needs an administrating role or ownership;
   reading a topic's details is a read.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from registry.ids import DEFAULT_TENANT
from registry.model import Role, TopicAcl

TENANT_TOPIC_PREFIX: Final = "iot."
REGISTRY_TOPIC: Final = "iot.registry"  # and everything under "iot.registry." (audit, tests)
_TENANT_TOPIC: Final = re.compile(r"iot\.([a-z0-9][a-z0-9-]{0,31})\.(.+)")
# roles that may publish/consume (api), only read (viewer), or also administrate topics
READ_ROLES: Final = frozenset({Role.API, Role.VIEWER, Role.OPERATOR, Role.TENANT_ADMIN, Role.ADMIN})
WRITE_ROLES: Final = frozenset({Role.API, Role.OPERATOR, Role.TENANT_ADMIN, Role.ADMIN})
MANAGE_ROLES: Final = frozenset({Role.OPERATOR, Role.TENANT_ADMIN, Role.ADMIN})


class Access(StrEnum):
    READ = "read"  # consume, details, listings
    WRITE = "write"  # publish
    MANAGE = "manage"  # create, delete, change the access lists


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: an api key (``name`` = the key) or a registry account
    (``svc/<name>``); ``tenant`` None = system-wide."""

    name: str
    kind: str  # "apikey" or "account"
    roles: tuple[Role, ...]
    tenant: str | None

    @property
    def key(self) -> str:
        """The name MR's ACLs and topic owners use: the api key, or the account name."""
        return self.name


def tenant_topic(tenant: str, name: str) -> str:
    """The Kafka topic of ``tenant`` called ``name`` (the default tenant's is ``name``)."""
    return name if tenant == DEFAULT_TENANT else f"{TENANT_TOPIC_PREFIX}{tenant}.{name}"


def is_system_topic(topic: str) -> bool:
    return topic == REGISTRY_TOPIC or topic.startswith((REGISTRY_TOPIC + ".", "__"))


def topic_tenant(topic: str, tenants: Collection[str]) -> str:
    """The tenant a topic belongs to (see the module's naming rule)."""
    m = _TENANT_TOPIC.fullmatch(topic)
    if m is not None and m[1] != DEFAULT_TENANT and m[1] in tenants:
        return m[1]
    return DEFAULT_TENANT


def _roles_allow(principal: Principal, access: Access) -> bool:
    wanted = {Access.READ: READ_ROLES, Access.WRITE: WRITE_ROLES, Access.MANAGE: MANAGE_ROLES}
    return bool(wanted[access] & set(principal.roles))


def may_access(
    principal: Principal,
    topic: str,
    access: Access,
    acl: TopicAcl | None,
    tenants: Collection[str],
) -> bool:
    """May ``principal`` ``access`` ``topic`` (whose registry metadata is ``acl``)?"""
    if is_system_topic(topic):
        return False
    if principal.tenant is not None and topic_tenant(topic, tenants) != principal.tenant:
        return False
    owner = acl is not None and bool(acl.owner) and acl.owner == principal.key
    if access is Access.MANAGE:
        return owner or _roles_allow(principal, Access.MANAGE)
    if not _roles_allow(principal, access):
        return False
    if acl is None or owner or _roles_allow(principal, Access.MANAGE):
        return True
    listed = acl.writers if access is Access.WRITE else acl.readers
    return not listed or principal.key in listed


def visible(
    principal: Principal | None,
    topics: Iterable[str],
    acls: dict[str, TopicAcl],
    tenants: Collection[str],
) -> list[str]:
    """The topics a listing shows ``principal`` (None = anonymous mode: every topic)."""
    if principal is None:
        return sorted(topics)
    return sorted(t for t in topics if may_access(principal, t, Access.READ, acls.get(t), tenants))


def may_manage_key(principal: Principal, key_tenant: str, key: str) -> bool:
    """MR: a key changes or deletes itself; ours also: an admin, or a tenant-admin of its
    tenant."""
    if principal.kind == "apikey" and principal.name == key:
        return True
    if Role.ADMIN in principal.roles and principal.tenant is None:
        return True
    return Role.TENANT_ADMIN in principal.roles and principal.tenant == key_tenant


def may_create_key(principal: Principal, tenant: str, role: Role) -> bool:
    """Keys are issued by a system admin (any tenant) or a tenant-admin (its own tenant), never
    with more rights than a tenant-admin."""
    if Role.ADMIN in principal.roles and principal.tenant is None:
        return True
    return Role.TENANT_ADMIN in principal.roles and principal.tenant == tenant and bool(role)


def may_see_key(principal: Principal, key_tenant: str, key: str) -> bool:
    """A key sees itself; readers of the registry's keys see their tenant's (or all)."""
    if principal.kind == "apikey" and principal.name == key:
        return True
    readers = {Role.ADMIN, Role.OPERATOR, Role.VIEWER, Role.TENANT_ADMIN}
    return bool(readers & set(principal.roles)) and principal.tenant in (None, key_tenant)
