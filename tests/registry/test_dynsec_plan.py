from __future__ import annotations

from registry import dynsec_plan as plan
from registry.model import Credentials, Device, Role, ServiceAccount

CREDS = Credentials(secret_hash="h")


def _names(cmds: list[plan.Command]) -> list[str]:
    return [c.body["command"] for c in cmds]


def test_add_device_replaces_a_stale_client_and_pins_the_client_id() -> None:
    device = Device("t1", "d1", ("g",), credentials=CREDS)
    cmds = plan.add_device(device, "s3cret")
    assert cmds[0].body == {"command": "deleteClient", "username": "t1/d1"}
    assert "Client not found" in cmds[0].tolerate
    client = next(c.body for c in cmds if c.body["command"] == "createClient")
    assert client["clientid"] == "t1/d1"
    assert client["password"] == "s3cret"
    assert client["roles"] == [{"rolename": "device:t1/d1"}]
    assert "createGroup" in _names(cmds)
    assert "disableClient" not in _names(cmds)
    # the device's role is replaced by one created with its ACLs: one dynsec change, not seven
    role = [c for c in cmds if c.body.get("rolename") == "device:t1/d1"]
    assert [c.body["command"] for c in role] == ["deleteRole", "createRole"]
    assert "Role not found" in role[0].tolerate
    assert {a["topic"] for a in role[1].body["acls"]} >= {
        "tenants/t1/devices/d1/telemetry",
        "tenants/t1/devices/d1/commands/#",
    }


def test_disabled_device_or_tenant_is_created_disabled_and_without_password() -> None:
    device = Device("t1", "d1", disabled=True, credentials=CREDS)
    cmds = plan.add_device(device, None)
    assert _names(cmds)[-1] == "disableClient"
    assert "password" not in next(c.body for c in cmds if c.body["command"] == "createClient")
    enabled = Device("t1", "d2", credentials=CREDS)
    assert _names(plan.add_device(enabled, "x", tenant_disabled=True))[-1] == "disableClient"


def test_update_device_sends_only_the_difference() -> None:
    old = Device("default", "d1", ("a",), credentials=CREDS)
    assert plan.update_device(old, old, None) == []
    disabled = Device("default", "d1", ("a",), True, CREDS)
    assert [c.body for c in plan.update_device(old, disabled, None)] == [
        {"command": "disableClient", "username": "d1"}
    ]
    moved = Device("default", "d1", ("b",), credentials=CREDS)
    names = _names(plan.update_device(old, moved, None))
    assert names[0] == "removeGroupClient"
    assert names[-1] == "addGroupClient"
    rotated = _names(plan.update_device(old, old, "new"))
    assert rotated == ["setClientPassword", "enableClient"]


def test_accounts_without_mqtt_roles_get_no_client() -> None:
    viewer = ServiceAccount("v", (Role.VIEWER,), credentials=CREDS)
    assert plan.add_account(viewer, "x") == []
    edge = ServiceAccount("e1", (Role.EDGE,), "t1", credentials=CREDS)
    client = plan.add_account(edge, "x")[-1].body
    assert client["username"] == "svc/e1"
    assert client["roles"] == [{"rolename": "site:e1"}]
    # services keep their own client ids (the command path opens several sessions)
    assert "clientid" not in client


def test_default_access_denies_all_but_unsubscribe() -> None:
    (cmd,) = plan.default_access()
    allows = {a["acltype"]: a["allow"] for a in cmd.body["acls"]}
    assert allows == {
        "publishClientSend": False,
        "publishClientReceive": False,
        "subscribe": False,
        "unsubscribe": True,
    }


CERT = Credentials(cert_fingerprint="sha256:" + "0" * 64)


def test_disabled_certificate_device_loses_its_role_and_groups() -> None:
    """A certificate login skips dynsec's disabled check (2.0.11): the role must go."""
    on = Device("t1", "d1", ("g",), credentials=CERT)
    off = Device("t1", "d1", ("g",), True, CERT)
    role = {"username": "t1/d1", "rolename": "device:t1/d1"}
    assert [c.body for c in plan.update_device(on, off, None)] == [
        {"command": "disableClient", "username": "t1/d1"},
        {"command": "removeClientRole", **role},
        {"command": "removeGroupClient", "groupname": "t1/g", "username": "t1/d1"},
    ]
    back = plan.update_device(off, on, None)
    assert _names(back) == [
        "enableClient", "removeClientRole", "addClientRole", "addGroupClient",
    ]  # fmt: skip
    assert _names(plan.add_device(off, None))[-3:] == [
        "disableClient", "removeClientRole", "removeGroupClient",
    ]  # fmt: skip
    tenant_off = plan.set_devices_enabled([on, Device("t1", "p", credentials=CREDS)], False)
    assert _names(tenant_off) == [
        "disableClient", "removeClientRole", "removeGroupClient", "disableClient",
    ]  # fmt: skip
    # a disabled password device that gets a certificate is stripped too
    pw_off = Device("t1", "d1", ("g",), True, CREDS)
    assert "removeClientRole" in _names(plan.update_device(pw_off, off, None))
    # unchanged state: nothing
    assert plan.update_device(on, on, None) == []


def test_a_site_gains_and_loses_one_device_s_rules() -> None:
    def site_acls(cmds: list[plan.Command], command: str) -> set[tuple[str, str]]:
        return {
            (c.body["rolename"], c.body["topic"])
            for c in cmds
            if c.body["command"] == command and c.body["rolename"].startswith("site:")
        }

    device = Device("t1", "d1", credentials=CREDS, site="s1")
    added = site_acls(plan.add_device(device, "x"), "addRoleACL")
    assert ("site:s1", "tenants/t1/devices/d1/telemetry") in added
    assert ("site:s1", "tenants/t1/devices/d1/commands/#") in added
    assert {role for role, _ in added} == {"site:s1"}
    moved = Device("t1", "d1", credentials=CREDS, site="s2", version=2)
    cmds = plan.update_device(device, moved, None)
    assert site_acls(cmds, "removeRoleACL") == {("site:s1", t) for _, t in added}
    assert site_acls(cmds, "addRoleACL") == {("site:s2", t) for _, t in added}
    assert site_acls(plan.update_device(moved, moved, None), "addRoleACL") == set()
    assert site_acls(plan.delete_device(moved), "removeRoleACL") == {
        ("site:s2", t) for _, t in added
    }
    edge = ServiceAccount("s2", (Role.EDGE,), "t1", credentials=CREDS)
    own = {("site:s2", "tenants/t1/sites/s2/state"), ("site:s2", "tenants/t1/sites/s2/status")}
    assert (
        site_acls(plan.add_account(edge, "x", site_devices=[moved]), "addRoleACL")
        == {("site:s2", t) for _, t in added} | own
    )
    assert "deleteRole" in _names(plan.delete_account(edge))


def test_a_site_acts_for_a_device_only_while_it_is_enabled() -> None:
    """Issue 37: a disabled device behind an edge site is refused at the centre at once (the
    site's own broker does not know the registry), so its rules leave the site's role."""

    def site_acls(cmds: list[plan.Command], command: str) -> set[str]:
        return {
            c.body["topic"]
            for c in cmds
            if c.body["command"] == command and c.body.get("rolename") == "site:s1"
        }

    on = Device("t1", "d1", credentials=CREDS, site="s1")
    off = Device("t1", "d1", disabled=True, credentials=CREDS, site="s1", version=2)
    rules = site_acls(plan.add_device(on, "x"), "addRoleACL")
    assert "tenants/t1/devices/d1/telemetry" in rules
    assert site_acls(plan.update_device(on, off, None), "removeRoleACL") == rules
    assert site_acls(plan.update_device(off, on, None), "addRoleACL") == rules
    assert site_acls(plan.add_device(off, "x"), "addRoleACL") == set()  # added disabled
    assert site_acls(plan.add_device(on, "x", tenant_disabled=True), "addRoleACL") == set()
    assert site_acls(plan.set_devices_enabled([on], False), "removeRoleACL") == rules
    assert site_acls(plan.set_devices_enabled([on], True), "addRoleACL") == rules
    moved_off = Device("t1", "d1", disabled=True, credentials=CREDS, site="s2", version=3)
    cmds = plan.update_device(off, moved_off, None)
    assert not any(c.body.get("rolename") == "site:s2" for c in cmds)  # no rules while off
