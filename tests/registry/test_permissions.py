from __future__ import annotations

from registry.model import Role
from registry.permissions import READ, WRITE, Actor, allowed, local_admin


def test_roles_grant_what_they_say() -> None:
    admin = local_admin("ops")
    assert allowed(admin, "tenant", WRITE, None)
    viewer = Actor("v", (Role.VIEWER,))
    assert allowed(viewer, "device", READ, "t1")
    assert not allowed(viewer, "device", WRITE, "t1")
    operator = Actor("o", (Role.OPERATOR,))
    assert allowed(operator, "device", WRITE, "t1")
    assert not allowed(operator, "tenant", WRITE, None)
    assert not allowed(Actor("b", (Role.BRIDGE,)), "device", READ, "t1")


def test_tenant_scoped_actors_stay_in_their_tenant() -> None:
    tadmin = Actor("ta", (Role.TENANT_ADMIN,), "t1")
    assert allowed(tadmin, "device", WRITE, "t1")
    assert not allowed(tadmin, "device", WRITE, "t2")
    assert not allowed(tadmin, "device", READ, "t2")
    assert not allowed(tadmin, "tenant", WRITE, None)
    assert not allowed(tadmin, "account", READ, None)
