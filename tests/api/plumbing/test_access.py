"""Tenant scoping and MR's topic ACLs as a pure decision over (principal, topic)."""

from __future__ import annotations

from api.plumbing.access import (
    Access,
    Principal,
    is_system_topic,
    may_access,
    may_create_key,
    may_manage_key,
    may_see_key,
    tenant_topic,
    topic_tenant,
    visible,
)
from registry.model import Role, TopicAcl

TENANTS = frozenset({"default", "acme", "globex"})
ACME = Principal("AcmeKey000000001", "apikey", (Role.API,), "acme")
ACME_VIEWER = Principal("AcmeView00000001", "apikey", (Role.VIEWER,), "acme")
ACME_ADMIN = Principal("AcmeAdmin0000001", "apikey", (Role.TENANT_ADMIN,), "acme")
DEFAULT = Principal("DefaultKey000001", "apikey", (Role.API,), "default")
ADMIN = Principal("svc/root", "account", (Role.ADMIN,), None)
SYSTEM_API = Principal("svc/feeder", "account", (Role.API,), None)


def test_topic_naming() -> None:
    assert tenant_topic("acme", "telemetry") == "iot.acme.telemetry"
    assert tenant_topic("default", "demo") == "demo"
    assert topic_tenant("iot.acme.telemetry", TENANTS) == "acme"
    assert topic_tenant("iot.telemetry", TENANTS) == "default"
    assert topic_tenant("iot.commands.dlq", TENANTS) == "default"  # no tenant "commands"
    assert topic_tenant("iot.unknown.x", TENANTS) == "default"
    assert topic_tenant("iot.default.x", TENANTS) == "default"
    assert topic_tenant("demo", TENANTS) == "default"
    for system in ("iot.registry", "iot.registry.audit", "iot.registry.abc", "__consumer_offsets"):
        assert is_system_topic(system)
    assert not is_system_topic("iot.registryish")


def test_a_tenant_reaches_only_its_topics() -> None:
    for access in (Access.READ, Access.WRITE):
        assert may_access(ACME, "iot.acme.telemetry", access, None, TENANTS)
        assert not may_access(ACME, "iot.globex.telemetry", access, None, TENANTS)
        assert not may_access(ACME, "demo", access, None, TENANTS)
        assert not may_access(ACME, "iot.telemetry", access, None, TENANTS)
        assert may_access(DEFAULT, "demo", access, None, TENANTS)
        assert may_access(DEFAULT, "iot.telemetry", access, None, TENANTS)
        assert not may_access(DEFAULT, "iot.acme.telemetry", access, None, TENANTS)
        for system_wide in (ADMIN, SYSTEM_API):
            assert may_access(system_wide, "iot.acme.telemetry", access, None, TENANTS)
            assert may_access(system_wide, "demo", access, None, TENANTS)


def test_system_topics_are_refused_to_everyone() -> None:
    for who in (ADMIN, SYSTEM_API, DEFAULT):
        for access in Access:
            assert not may_access(who, "iot.registry", access, None, TENANTS)
            assert not may_access(who, "__consumer_offsets", access, None, TENANTS)


def test_roles() -> None:
    topic = "iot.acme.t"
    assert may_access(ACME_VIEWER, topic, Access.READ, None, TENANTS)
    assert not may_access(ACME_VIEWER, topic, Access.WRITE, None, TENANTS)
    assert not may_access(ACME, topic, Access.MANAGE, None, TENANTS)  # neither owner nor admin
    assert may_access(ACME_ADMIN, topic, Access.MANAGE, None, TENANTS)
    assert not may_access(ACME_ADMIN, "iot.globex.t", Access.MANAGE, None, TENANTS)


def test_acls_restrict_within_the_tenant() -> None:
    topic = "iot.acme.t"
    other = Principal("AcmeOther0000001", "apikey", (Role.API,), "acme")
    acl = TopicAcl(topic, "acme", owner=ACME.name, writers=(), readers=("AcmeReader000001",))
    assert may_access(ACME, topic, Access.READ, acl, TENANTS)  # the owner
    assert may_access(ACME, topic, Access.MANAGE, acl, TENANTS)  # the owner manages
    assert not may_access(other, topic, Access.READ, acl, TENANTS)  # not listed
    assert may_access(other, topic, Access.WRITE, acl, TENANTS)  # empty writer list: open
    assert not may_access(other, topic, Access.MANAGE, acl, TENANTS)
    reader = Principal("AcmeReader000001", "apikey", (Role.API,), "acme")
    assert may_access(reader, topic, Access.READ, acl, TENANTS)
    assert may_access(ACME_ADMIN, topic, Access.READ, acl, TENANTS)  # administrating role
    outsider = Principal("AcmeReader000001", "apikey", (Role.API,), "globex")
    assert not may_access(outsider, topic, Access.READ, acl, TENANTS)  # listed, wrong tenant


def test_listing_shows_what_may_be_read() -> None:
    names = ["demo", "iot.acme.a", "iot.globex.b", "iot.registry", "__consumer_offsets"]
    assert visible(ACME, names, {}, TENANTS) == ["iot.acme.a"]
    assert visible(DEFAULT, names, {}, TENANTS) == ["demo"]
    assert visible(ADMIN, names, {}, TENANTS) == ["demo", "iot.acme.a", "iot.globex.b"]
    assert visible(None, names, {}, TENANTS) == sorted(names)


def test_key_management_rights() -> None:
    assert may_create_key(ADMIN, "acme", Role.API)
    assert may_create_key(ACME_ADMIN, "acme", Role.API)
    assert not may_create_key(ACME_ADMIN, "globex", Role.API)
    assert not may_create_key(ACME, "acme", Role.API)
    assert not may_create_key(SYSTEM_API, "default", Role.API)
    assert may_manage_key(ACME, "acme", ACME.name)  # itself (MR)
    assert not may_manage_key(ACME, "acme", "AcmeOther0000001")
    assert may_manage_key(ACME_ADMIN, "acme", "AcmeOther0000001")
    assert not may_manage_key(ACME_ADMIN, "globex", "GlobexKey0000001")
    assert may_manage_key(ADMIN, "globex", "GlobexKey0000001")
    assert may_see_key(ACME, "acme", ACME.name)
    assert not may_see_key(ACME, "acme", "AcmeOther0000001")
    assert may_see_key(ACME_VIEWER, "acme", "AcmeOther0000001")
    assert not may_see_key(ACME_VIEWER, "globex", "GlobexKey0000001")
