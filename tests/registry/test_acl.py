from __future__ import annotations

from paho.mqtt.client import topic_matches_sub

from registry import acl
from registry.acl import PUBLISH, RECEIVE, SUBSCRIBE, AclRule
from registry.model import Role


def _may(rules: list[AclRule], acltype: str, topic: str) -> bool:
    """Does a rule of ``acltype`` allow ``topic`` (a topic, or a filter for SUBSCRIBE)?"""
    for rule in rules:
        if rule.acltype != acltype or not rule.allow:
            continue
        if acltype == SUBSCRIBE and rule.topic == topic:
            return True
        if topic_matches_sub(rule.topic, topic):
            return True
    return False


def test_device_publishes_only_its_own_upward_topics() -> None:
    rules = acl.device_rules("default", "d1")
    for ok in ("telemetry", "events", "status", "replies/c-1"):
        assert _may(rules, PUBLISH, f"devices/d1/{ok}")
    for denied in (
        "devices/d2/telemetry",
        "devices/d1/commands/reboot",
        "devices/d1/telemetry/extra",
        "devices/d1/replies/a/b",
        "groups/g/commands/x",
        "tenants/t1/devices/d1/telemetry",
        "$SYS/broker/uptime",
    ):
        assert not _may(rules, PUBLISH, denied), denied


def test_device_subscribes_only_to_its_commands() -> None:
    rules = acl.device_rules("default", "d1")
    assert _may(rules, SUBSCRIBE, "devices/d1/commands/#")
    assert _may(rules, RECEIVE, "devices/d1/commands/reboot")
    for denied in ("#", "$SYS/#", "devices/#", "devices/d2/commands/#", "devices/+/commands/#"):
        assert not _may(rules, SUBSCRIBE, denied), denied
    assert not _may(rules, RECEIVE, "devices/d2/commands/reboot")


def test_tenant_devices_are_confined_to_their_tenant() -> None:
    rules = acl.device_rules("t1", "d1")
    assert _may(rules, PUBLISH, "tenants/t1/devices/d1/telemetry")
    assert not _may(rules, PUBLISH, "devices/d1/telemetry")
    assert not _may(rules, PUBLISH, "tenants/t2/devices/d1/telemetry")
    assert _may(rules, RECEIVE, "tenants/t1/devices/d1/commands/x")


def test_group_rules_open_only_the_group_commands() -> None:
    rules = acl.group_rules("t1", "floor")
    assert _may(rules, RECEIVE, "tenants/t1/groups/floor/commands/x")
    assert not _may(rules, RECEIVE, "tenants/t1/groups/other/commands/x")
    assert not _may(rules, PUBLISH, "tenants/t1/groups/floor/commands/x")


def test_service_roles() -> None:
    bridge = acl.service_rules(Role.BRIDGE, None)
    assert _may(bridge, RECEIVE, "devices/d1/telemetry")
    assert _may(bridge, RECEIVE, "tenants/t9/devices/d1/events")
    assert not _may(bridge, PUBLISH, "devices/d1/commands/x")
    assert _may(bridge, SUBSCRIBE, "$share/+/devices/+/telemetry")
    commands = acl.service_rules(Role.COMMANDS, None)
    assert _may(commands, PUBLISH, "devices/d1/commands/x")
    assert _may(commands, PUBLISH, "tenants/t1/groups/g/commands/x")
    assert _may(commands, RECEIVE, "devices/d1/replies/c1")
    # an edge site has no tenant-wide rules: only its own devices' (test_site_rules)
    assert acl.service_rules(Role.EDGE, "t1") == []
    assert acl.service_rules(Role.ADMIN, None) == []
    assert acl.service_rules(Role.VIEWER, None) == []


def test_role_names_are_per_entity() -> None:
    assert acl.device_role_name("t1", "d1") != acl.device_role_name("t2", "d1")
    assert acl.service_role_name(Role.EDGE, "t1") == "svc:edge:t1"
    assert acl.service_role_name(Role.BRIDGE, None) == "svc:bridge"


def test_site_rules_cover_one_device_only() -> None:
    rules = acl.site_device_rules("t1", "pump-1")
    for channel in ("telemetry", "events", "status", "replies/c1"):
        assert _may(rules, PUBLISH, f"tenants/t1/devices/pump-1/{channel}")
    assert _may(rules, RECEIVE, "tenants/t1/devices/pump-1/commands/reboot")
    assert _may(rules, SUBSCRIBE, "tenants/t1/devices/pump-1/commands/#")
    assert not _may(rules, PUBLISH, "tenants/t1/devices/pump-2/telemetry")
    assert not _may(rules, PUBLISH, "tenants/t1/devices/pump-1/commands/x")
    assert not _may(rules, RECEIVE, "tenants/t1/devices/pump-2/commands/x")
    assert not _may(rules, PUBLISH, "devices/pump-1/telemetry")
    assert acl.site_role_name("site-a") == "site:site-a"
