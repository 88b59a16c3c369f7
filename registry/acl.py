"""The MQTT access rules of devices, groups and service accounts (pure).

Rules are Mosquitto dynamic-security ACL entries. Mosquitto 2.0.11's dynsec does not
substitute ``%u``/``%c`` (field notes B.4), so every device gets its own role with literal
topics. Defaults (set by the dynsec adapter) deny everything not granted here, including
``publishClientReceive``: a device receives only what a rule below lets it receive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from registry import ids, topics
from registry.model import Role

PUBLISH: Final = "publishClientSend"
RECEIVE: Final = "publishClientReceive"
SUBSCRIBE: Final = "subscribePattern"

# What a device may publish under its own root (design.md "MQTT topics").
DEVICE_PUBLISH: Final = ("telemetry", "events", "status", "replies/+")


@dataclass(frozen=True, order=True)
class AclRule:
    acltype: str
    topic: str
    allow: bool = True
    priority: int = 0

    def to_dynsec(self) -> dict[str, Any]:
        return {
            "acltype": self.acltype,
            "topic": self.topic,
            "allow": self.allow,
            "priority": self.priority,
        }


def device_role_name(tenant: str, device: str) -> str:
    return f"device:{ids.device_key(tenant, device)}"


def group_role_name(tenant: str, group: str) -> str:
    return f"group:{tenant}/{group}"


def dynsec_group_name(tenant: str, group: str) -> str:
    return f"{tenant}/{group}"


def service_role_name(role: Role, tenant: str | None) -> str:
    return f"svc:{role}" if tenant is None else f"svc:{role}:{tenant}"


def site_role_name(account: str) -> str:
    """The role of one edge site (an ``edge`` account): the devices registered to it."""
    return f"site:{account}"


def site_rules(tenant: str, site: str) -> list[AclRule]:
    """An edge site announces its link state (the bridge's notification and will) and status."""
    root = topics.site_root(tenant, site)
    return [AclRule(PUBLISH, f"{root}/state"), AclRule(PUBLISH, f"{root}/status")]


def site_device_rules(tenant: str, device: str) -> list[AclRule]:
    """What an edge site may do for one of its devices: publish the device's up-link,
    subscribe to and receive its commands (literal topics: no %u in 2.0.11's dynsec)."""
    root = topics.device_root(tenant, device)
    rules = [AclRule(PUBLISH, f"{root}/{channel}") for channel in DEVICE_PUBLISH]
    return rules + _both(f"{root}/commands/#")


def device_rules(tenant: str, device: str) -> list[AclRule]:
    """Publish its own telemetry/events/status/replies; subscribe to its own commands."""
    root = topics.device_root(tenant, device)
    rules = [AclRule(PUBLISH, f"{root}/{channel}") for channel in DEVICE_PUBLISH]
    rules += [AclRule(SUBSCRIBE, f"{root}/commands/#"), AclRule(RECEIVE, f"{root}/commands/#")]
    return rules


def group_rules(tenant: str, group: str) -> list[AclRule]:
    """Members may subscribe to (and receive) the group's broadcast commands."""
    root = topics.group_root(tenant, group)
    return [AclRule(SUBSCRIBE, f"{root}/commands/#"), AclRule(RECEIVE, f"{root}/commands/#")]


def _roots(tenant: str | None) -> list[str]:
    """Topic roots an account of ``tenant`` may address: its own, or every tenant's (None)."""
    if tenant is None:
        return ["", "tenants/+/"]
    return [topics.tenant_root(tenant)]


def _both(topic: str) -> list[AclRule]:
    return [AclRule(SUBSCRIBE, topic), AclRule(RECEIVE, topic)]


def _shared(topic: str) -> list[AclRule]:
    """Also as a shared subscription: dynsec checks the whole ``$share/{group}/...`` filter
    (measured: ``devices/+/telemetry`` alone refuses ``$share/g/devices/+/telemetry``)."""
    return [*_both(topic), AclRule(SUBSCRIBE, f"$share/+/{topic}")]


def service_rules(role: Role, tenant: str | None) -> list[AclRule]:
    """The MQTT rules of a service role; operator roles have none (they act over HTTP)."""
    rules: list[AclRule] = []
    for root in _roots(tenant):
        devices = f"{root}devices/+"
        if role is Role.BRIDGE:  # reads all device->cloud traffic
            for channel in ("telemetry", "events", "status", "replies/+"):
                rules += _shared(f"{devices}/{channel}")
            # edge sites' link state and status (docs/edge.md "Visibility")
            rules += _both(f"{root}sites/+/state") + _both(f"{root}sites/+/status")
        elif role is Role.COMMANDS:  # sends commands, reads replies
            rules += [
                AclRule(PUBLISH, f"{devices}/commands/#"),
                AclRule(PUBLISH, f"{root}groups/+/commands/#"),
            ]
            rules += _shared(f"{devices}/replies/+")
        elif role is Role.API:  # acts for devices: their up-link, their commands
            rules += [AclRule(PUBLISH, f"{devices}/{ch}") for ch in DEVICE_PUBLISH]
            rules += _both(f"{devices}/commands/#")
            rules += _both(f"{root}groups/+/commands/#")
        # Role.EDGE has no tenant-wide rules: a site acts only for the devices registered to
        # it, through its own role (site_role_name / site_device_rules).
    return rules
