"""Bring Mosquitto's dynamic security in step with the registry (service).

Used after Mosquitto lost or missed changes (a MosquittoOutOfStepError, a restored dynsec file).
It sets the deny-by-default access, removes clients the registry does not know (except the
registry's own admin), recreates roles, groups, memberships and enabled/disabled state. It
cannot restore secrets, which the registry never keeps: a client that is missing from
Mosquitto is created without a password and listed as needing a rotate.
"""

from __future__ import annotations

from typing import Any

from registry import acl, topics
from registry import dynsec_plan as plan
from registry.dynsec_plan import Command
from registry.errors import RegistryError
from registry.model import MQTT_ROLES, Device
from registry.service import Registry
from registry.state import RegistryState


def _on(state: RegistryState, device: Device) -> bool:
    owner = state.tenants.get(device.tenant)
    return not device.disabled and owner is not None and not owner.disabled


def sync_mosquitto(registry: Registry) -> dict[str, Any]:
    """Apply the registry to Mosquitto; returns what was done."""
    mosquitto = registry.mosquitto
    if mosquitto is None:
        raise RegistryError("no Mosquitto admin connection (--admin-password-file)")
    state = registry.state
    existing = set(mosquitto.list_clients())
    wanted: dict[str, list[Command]] = {}
    missing: list[str] = []
    for device in state.devices.values():
        username = topics.device_username(device.tenant, device.id)
        owner = state.tenants.get(device.tenant)
        tenant_disabled = owner is None or owner.disabled
        if username not in existing:
            missing.append(username)
            wanted[username] = plan.add_device(device, None, tenant_disabled)
            continue
        cmds = plan.ensure_role(
            acl.device_role_name(device.tenant, device.id),
            acl.device_rules(device.tenant, device.id),
        )
        for group in device.groups:
            cmds += plan.ensure_group(device.tenant, group)
            name = acl.dynsec_group_name(device.tenant, group)
            body = {"command": "addGroupClient", "groupname": name, "username": username}
            cmds.append(Command(body, plan.EXISTS))
        cmds += plan.set_devices_enabled([device], not tenant_disabled)  # its site's rules too
        wanted[username] = cmds
    for account in state.accounts.values():
        if not any(r in MQTT_ROLES for r in account.roles):
            continue
        username = topics.account_username(account.name)
        owner = state.tenants.get(account.tenant or "")
        tenant_on = account.tenant is None or (owner is not None and not owner.disabled)
        linked = [d for d in state.devices.values() if d.site == account.name and _on(state, d)]
        if username not in existing:
            missing.append(username)
            wanted[username] = plan.add_account(account, None, not tenant_on, linked)
        else:  # its roles too: rules added since it was created (e.g. a site's devices)
            _names, cmds = plan.account_roles(account, linked)
            wanted[username] = cmds + plan.set_accounts_enabled([account], tenant_on)
    stale = sorted(existing - set(wanted) - {topics.ADMIN_USERNAME})
    cmds = plan.default_access()
    cmds += [Command({"command": "deleteClient", "username": u}, plan.MISSING) for u in stale]
    for username in sorted(wanted):
        cmds += wanted[username]
    mosquitto.call(cmds)
    return {"deleted": stale, "created_need_rotate": sorted(missing), "commands": len(cmds)}
