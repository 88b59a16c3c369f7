"""Registry changes as Mosquitto dynamic-security commands (pure).

Mapping (docs/security.md):
- device -> dynsec client (user name = pinned client id = topics.device_username) with its own
  role ``device:{tenant}/{id}`` holding literal topics (2.0.11 has no %u in dynsec);
- registry group -> dynsec group ``{tenant}/{group}`` with role ``group:{tenant}/{group}``
  (subscribe to the group's commands); a device's groups are its dynsec groups;
- service account with MQTT roles -> client ``svc/{name}`` with roles ``svc:{role}[:tenant]``;
- disabled device, or device of a disabled tenant -> ``disableClient`` (Mosquitto drops it).
The secret reaches Mosquitto only inside createClient/setClientPassword, in the clear over
the registry's admin connection; Mosquitto hashes it (PBKDF2-SHA512) and the registry forgets it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from registry import acl, ids, topics
from registry.acl import AclRule
from registry.model import MQTT_ROLES, Device, Role, ServiceAccount

EXISTS = frozenset(
    {
        "Client already exists",
        "Role already exists",
        "Group already exists",
        "Group is already in this role",
        "Client is already in this group",
        "ACL with this topic already exists",
    }
)
MISSING = frozenset({"Client not found", "Role not found", "Group not found", "ACL not found"})


@dataclass(frozen=True)
class Command:
    """One dynsec command and the error strings that mean "already so" for it."""

    body: dict[str, Any]
    tolerate: frozenset[str] = field(default_factory=frozenset)


def default_access() -> list[Command]:
    """Deny by default everything no role grants, delivery to clients included."""
    acls = [
        {"acltype": t, "allow": False}
        for t in ("publishClientSend", "publishClientReceive", "subscribe")
    ] + [{"acltype": "unsubscribe", "allow": True}]
    return [Command({"command": "setDefaultACLAccess", "acls": acls})]


def ensure_role(name: str, rules: Iterable[AclRule]) -> list[Command]:
    cmds = [Command({"command": "createRole", "rolename": name}, EXISTS)]
    cmds += [
        Command({"command": "addRoleACL", "rolename": name, **rule.to_dynsec()}, EXISTS)
        for rule in rules
    ]
    return cmds


def fresh_role(name: str, rules: Iterable[AclRule]) -> list[Command]:
    """The role with exactly ``rules``: a stale one of that name is dropped, then the role is
    created with its ACLs in one command. Mosquitto 2.0.11 rewrites its whole dynsec file after
    every command that changes something, so commands per device decide how provisioning a
    fleet scales: this is 1 write where ensure_role's createRole + addRoleACL each were 7."""
    return [
        Command({"command": "deleteRole", "rolename": name}, MISSING),
        Command(
            {"command": "createRole", "rolename": name, "acls": [r.to_dynsec() for r in rules]}
        ),
    ]


def ensure_group(tenant: str, group: str) -> list[Command]:
    name, role = acl.dynsec_group_name(tenant, group), acl.group_role_name(tenant, group)
    cmds = ensure_role(role, acl.group_rules(tenant, group))
    cmds.append(Command({"command": "createGroup", "groupname": name}, EXISTS))
    cmds.append(Command({"command": "addGroupRole", "groupname": name, "rolename": role}, EXISTS))
    return cmds


def _client(
    username: str, secret: str | None, roles: list[str], groups: list[str], pin: bool = True
) -> Command:
    body: dict[str, Any] = {
        "command": "createClient",
        "username": username,
        "roles": [{"rolename": r} for r in roles],
        "groups": [{"groupname": g} for g in groups],
    }
    if pin:  # nobody can take over another's session by client id
        body["clientid"] = username
    if secret is not None:
        body["password"] = secret
    return Command(body)


def _enabled(username: str, enabled: bool) -> Command:
    return Command(
        {"command": "enableClient" if enabled else "disableClient", "username": username}
    )


def _cert_access(device: Device, enabled: bool) -> list[Command]:
    """A certificate device's role and groups: granted while enabled, taken while disabled.

    On the mutual-TLS listener (use_identity_as_username) Mosquitto 2.0.11 skips the plugin's
    password check, which is where dynsec tests the disabled flag: a disabled client with a
    valid certificate connected and published (measured). Without its role it can do nothing.
    Removing an absent role succeeds, adding a present one answers "Internal error" (2.0.11),
    hence remove-then-add."""
    if device.credentials.cert_fingerprint is None:
        return []
    username = topics.device_username(device.tenant, device.id)
    role = {"username": username, "rolename": acl.device_role_name(device.tenant, device.id)}
    cmds = [Command({"command": "removeClientRole", **role})]
    if enabled:
        cmds.append(Command({"command": "addClientRole", **role}))
    for group in device.groups:
        body = {
            "command": "addGroupClient" if enabled else "removeGroupClient",
            "groupname": acl.dynsec_group_name(device.tenant, group),
            "username": username,
        }
        cmds.append(Command(body, EXISTS if enabled else MISSING))
    return cmds


def add_device(device: Device, secret: str | None, tenant_disabled: bool = False) -> list[Command]:
    """Create the device's client (replacing a stale one of that name) with role and groups."""
    username = topics.device_username(device.tenant, device.id)
    role = acl.device_role_name(device.tenant, device.id)
    cmds = [Command({"command": "deleteClient", "username": username}, MISSING)]
    cmds += fresh_role(role, acl.device_rules(device.tenant, device.id))
    for group in device.groups:
        cmds += ensure_group(device.tenant, group)
    groups = [acl.dynsec_group_name(device.tenant, g) for g in device.groups]
    cmds.append(_client(username, secret, [role], groups))
    if device.disabled or tenant_disabled:
        cmds.append(_enabled(username, False))
        cmds += _cert_access(device, False)
        return cmds  # its site gains no rules for it while it is disabled
    return cmds + site_access(device, device.site, grant=True)


def site_access(device: Device, site: str | None, grant: bool) -> list[Command]:
    """Grant or take the rules of ``device`` on its edge site's role (none without a site).

    The site's role is ensured first so a device can be linked before its site connects."""
    if site is None:
        return []
    role = acl.site_role_name(site)
    rules = acl.site_device_rules(device.tenant, device.id)
    if grant:
        return ensure_role(role, rules)
    return [
        Command(
            {"command": "removeRoleACL", "rolename": role, "acltype": r.acltype, "topic": r.topic},
            MISSING,
        )
        for r in rules
    ]


def update_device(
    old: Device, new: Device, secret: str | None, tenant_disabled: bool = False
) -> list[Command]:
    """The commands that take Mosquitto from ``old`` to ``new`` (same tenant and id)."""
    username = topics.device_username(new.tenant, new.id)
    cmds: list[Command] = []
    for group in sorted(set(old.groups) - set(new.groups)):
        name = acl.dynsec_group_name(new.tenant, group)
        body = {"command": "removeGroupClient", "groupname": name, "username": username}
        cmds.append(Command(body, MISSING))
    for group in sorted(set(new.groups) - set(old.groups)):
        cmds += ensure_group(new.tenant, group)
        name = acl.dynsec_group_name(new.tenant, group)
        body = {"command": "addGroupClient", "groupname": name, "username": username}
        cmds.append(Command(body, EXISTS))
    if secret is not None:
        cmds.append(
            Command({"command": "setClientPassword", "username": username, "password": secret})
        )
    was_on = not old.disabled and not tenant_disabled
    is_on = not new.disabled and not tenant_disabled
    if was_on != is_on or secret is not None:
        cmds.append(_enabled(username, is_on))
    new_cert = new.credentials.cert_fingerprint and not old.credentials.cert_fingerprint
    if was_on != is_on or (new_cert and not is_on):
        cmds += _cert_access(new, is_on)
    # a device behind an edge site: the site acts for it only while it is enabled (the site
    # broker keeps its own password file, so the centre's rules are what refuse it at once)
    if old.site != new.site:
        cmds += site_access(old, old.site, grant=False)
        cmds += site_access(new, new.site, grant=is_on) if is_on else []
    elif was_on != is_on:
        cmds += site_access(new, new.site, grant=is_on)
    return cmds


def delete_device(device: Device) -> list[Command]:
    username = topics.device_username(device.tenant, device.id)
    role = acl.device_role_name(device.tenant, device.id)
    return [
        *site_access(device, device.site, grant=False),
        Command({"command": "deleteClient", "username": username}, MISSING),
        Command({"command": "deleteRole", "rolename": role}, MISSING),
    ]


def set_devices_enabled(devices: Iterable[Device], tenant_enabled: bool) -> list[Command]:
    """A tenant disabled or enabled: every device follows (its own flag still counts)."""
    cmds: list[Command] = []
    for d in devices:
        on = tenant_enabled and not d.disabled
        cmds.append(_enabled(topics.device_username(d.tenant, d.id), on))
        cmds += _cert_access(d, on)
        cmds += site_access(d, d.site, grant=on)
    return cmds


def set_accounts_enabled(accounts: Iterable[ServiceAccount], tenant_enabled: bool) -> list[Command]:
    """A tenant disabled or enabled: its accounts with a Mosquitto client follow."""
    return [
        _enabled(topics.account_username(a.name), tenant_enabled and not a.disabled)
        for a in accounts
        if any(r in MQTT_ROLES for r in a.roles)
    ]


def delete_groups(tenant: str, groups: Iterable[str]) -> list[Command]:
    """The dynsec groups and roles of a deleted tenant's groups."""
    cmds: list[Command] = []
    for group in sorted(set(groups)):
        name, role = acl.dynsec_group_name(tenant, group), acl.group_role_name(tenant, group)
        cmds.append(Command({"command": "deleteGroup", "groupname": name}, MISSING))
        cmds.append(Command({"command": "deleteRole", "rolename": role}, MISSING))
    return cmds


def account_roles(
    account: ServiceAccount, site_devices: Iterable[Device] = ()
) -> tuple[list[str], list[Command]]:
    """The dynsec role names of an account's MQTT roles and the commands that ensure them. An
    edge site has a role of its own: its state/status topics and ``site_devices``' rules."""
    cmds: list[Command] = []
    names = []
    for role in (r for r in account.roles if r in MQTT_ROLES):
        if role is Role.EDGE:
            name = acl.site_role_name(account.name)
            rules = acl.site_rules(account.tenant or ids.DEFAULT_TENANT, account.name)
            rules += [r for d in site_devices for r in acl.site_device_rules(d.tenant, d.id)]
        else:
            name = acl.service_role_name(role, account.tenant)
            rules = acl.service_rules(role, account.tenant)
        names.append(name)
        cmds += ensure_role(name, rules)
    return names, cmds


def add_account(
    account: ServiceAccount,
    secret: str | None,
    tenant_disabled: bool = False,
    site_devices: Iterable[Device] = (),
) -> list[Command]:
    """Accounts without an MQTT role (operators) get no Mosquitto client at all."""
    names, cmds = account_roles(account, site_devices)
    if not names:
        return []
    username = topics.account_username(account.name)
    cmds.insert(0, Command({"command": "deleteClient", "username": username}, MISSING))
    # Not pinned: a service opens several sessions under one account (the command path's
    # publisher pool, iot-bridge-commands-p1...) and keeps its stable client ids. Devices stay
    # pinned, so no device can take over a service's session.
    cmds.append(_client(username, secret, names, [], pin=False))
    if account.disabled or tenant_disabled:
        cmds.append(_enabled(username, False))
    return cmds


def update_account(
    old: ServiceAccount, new: ServiceAccount, secret: str | None, tenant_disabled: bool = False
) -> list[Command]:
    if not any(r in MQTT_ROLES for r in new.roles):
        return []
    username = topics.account_username(new.name)
    cmds: list[Command] = []
    if secret is not None:
        cmds.append(
            Command({"command": "setClientPassword", "username": username, "password": secret})
        )
    if old.disabled != new.disabled or secret is not None:
        cmds.append(_enabled(username, not new.disabled and not tenant_disabled))
    return cmds


def delete_account(account: ServiceAccount) -> list[Command]:
    username = topics.account_username(account.name)
    cmds = [Command({"command": "deleteClient", "username": username}, MISSING)]
    if Role.EDGE in account.roles:
        role = acl.site_role_name(account.name)
        cmds.append(Command({"command": "deleteRole", "rolename": role}, MISSING))
    return cmds
