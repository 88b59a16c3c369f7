from __future__ import annotations

from api.console import roles
from registry.model import Role
from registry.permissions import Actor


def test_each_role_gets_what_docs_console_md_says() -> None:
    admin = roles.capabilities(Actor("a", (Role.ADMIN,)))
    operator = roles.capabilities(Actor("o", (Role.OPERATOR,)))
    viewer = roles.capabilities(Actor("v", (Role.VIEWER,)))
    tenant = roles.capabilities(Actor("t", (Role.TENANT_ADMIN,), "acme"))
    assert roles.VIEW_TENANTS in admin
    assert roles.VIEW_TENANTS not in operator
    assert {roles.SEND_COMMANDS, roles.MANAGE_DEVICES, roles.REPLAY_DLQ} <= operator
    assert viewer == {roles.VIEW_FLEET, roles.VIEW_KAFKA, roles.VIEW_DLQ}
    # its own tenant's dead letters (pages.py scopes them), no raw topics
    assert tenant == {
        roles.VIEW_FLEET, roles.SEND_COMMANDS, roles.MANAGE_DEVICES, roles.VIEW_DLQ,
        roles.REPLAY_DLQ,
    }  # fmt: skip


def test_service_roles_cannot_log_in() -> None:
    assert not roles.may_log_in(Actor("svc/bridge", (Role.BRIDGE,)))
    assert not roles.may_log_in(Actor("svc/api", (Role.API,)))
    assert roles.may_log_in(Actor("svc/v", (Role.VIEWER,)))


def test_a_tenant_account_never_sees_across_tenants() -> None:
    scoped_operator = Actor("o", (Role.OPERATOR,), "acme")
    assert not roles.may(scoped_operator, roles.VIEW_KAFKA)
    assert not roles.may(scoped_operator, roles.VIEW_TENANTS)
    assert roles.may(scoped_operator, roles.SEND_COMMANDS)
    # dead letters: its own tenant's only, which the pages check letter by letter
    assert roles.may(scoped_operator, roles.REPLAY_DLQ)
    assert not roles.may(Actor("v", (Role.VIEWER,), "acme"), roles.REPLAY_DLQ)
