"""Tenant-aware MQTT topic roots and MQTT user names (pure).

The default tenant keeps the design's topics (``devices/{id}/...``, ``groups/{g}/...``), so
single-tenant use is as today. Any other tenant's devices live under ``tenants/{tenant}/``:
two tenants may both have a device ``pump-1`` and their topics never meet. The tenant is
never chosen by the device: its credentials (user name) decide it, and its ACL (acl.py) only
opens its own tenant's subtree.

MQTT user names (also the pinned client id in Mosquitto's dynamic security):
- a default-tenant device: its id (``pump-1``), as today;
- another tenant's device: ``{tenant}/{id}`` (device and tenant ids never contain ``/``);
- a service account: ``svc/{name}`` (tenant id ``svc`` is reserved, model.RESERVED_TENANTS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from registry import ids

SERVICE_PREFIX: Final = "svc"
ADMIN_USERNAME: Final = "svc/registry"  # the registry's own dynsec admin client


def tenant_root(tenant: str) -> str:
    """The prefix (with trailing ``/``) of every topic of ``tenant``; empty for the default."""
    return "" if tenant == ids.DEFAULT_TENANT else f"tenants/{tenant}/"


def device_root(tenant: str, device: str) -> str:
    return f"{tenant_root(tenant)}devices/{device}"


def group_root(tenant: str, group: str) -> str:
    return f"{tenant_root(tenant)}groups/{group}"


def site_root(tenant: str, site: str) -> str:
    """An edge site's own topics (its link state and status), named after its account."""
    return f"{tenant_root(tenant)}sites/{site}"


def device_username(tenant: str, device: str) -> str:
    return device if tenant == ids.DEFAULT_TENANT else f"{tenant}/{device}"


def account_username(name: str) -> str:
    return f"{SERVICE_PREFIX}/{name}"


@dataclass(frozen=True)
class Principal:
    """Who an MQTT user name names: a device (tenant, id) or a service account."""

    kind: str  # "device" or "account"
    name: str
    tenant: str | None = None


def parse_username(username: str) -> Principal:
    """The principal behind an MQTT user name; InvalidIdError if it names none."""
    first, sep, rest = username.partition("/")
    if not sep:
        return Principal("device", ids.device_id(first), ids.DEFAULT_TENANT)
    if first == SERVICE_PREFIX:
        return Principal("account", ids.account_name(rest))
    return Principal("device", ids.device_id(rest), ids.tenant_id(first))
