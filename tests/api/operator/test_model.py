"""The operator routes' pure rules: role -> operation table, tenant scope, request parsing,
command filters and views."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from api.errors import ApiError
from api.operator.model import (
    ROLE_OPERATIONS,
    Caller,
    CommandFilter,
    Operation,
    command_view,
    device_view,
    groups_of,
    operations,
    parse_limit,
    parse_ms,
    parse_seconds,
    parse_send,
    presence_matches,
    reaches,
    require,
    scoped_tenant,
    sse_event,
    status_tenant,
    visible_commands,
)
from registry.model import Role

ADMIN = Caller("svc/root", (Role.ADMIN,), None)
ACME_API = Caller("apikey/K1", (Role.API,), "acme")
ACME_VIEWER = Caller("apikey/K2", (Role.VIEWER,), "acme")
ACME_TADMIN = Caller("apikey/K3", (Role.TENANT_ADMIN,), "acme")


def test_role_table() -> None:
    assert operations(ACME_VIEWER) == {Operation.READ}
    assert operations(ACME_API) == {Operation.READ, Operation.SEND}
    assert operations(ACME_TADMIN) == {Operation.READ, Operation.SEND, Operation.DEVICES}
    assert operations(ADMIN) == set(Operation)
    # an admin bound to a tenant never creates or removes tenants
    assert Operation.TENANTS not in operations(Caller("x", (Role.ADMIN,), "acme"))
    # service roles without an entry get nothing
    assert operations(Caller("e", (Role.EDGE,), "acme")) == set()
    assert Role.EDGE not in ROLE_OPERATIONS


def test_require_is_mr_403() -> None:
    with pytest.raises(ApiError) as err:
        require(ACME_VIEWER, Operation.SEND)
    assert (err.value.status, err.value.mrstatus) == (403, 4002)
    require(ACME_API, Operation.SEND)


def test_scope() -> None:
    assert reaches(ADMIN, "beta")
    assert reaches(ACME_API, "acme")
    assert not reaches(ACME_API, "beta")
    assert not reaches(ACME_API, None)  # a command of unknown tenant: system-wide only
    assert scoped_tenant(ACME_API, None) == "acme"
    assert scoped_tenant(ADMIN, None) == "default"
    with pytest.raises(ApiError) as err:
        scoped_tenant(ACME_API, "beta")
    assert err.value.status == 404


def test_parse_send() -> None:
    sent = parse_send({"device": "pump-1", "name": "reboot", "args": {"a": 1}}, ACME_API)
    assert (sent.tenant, sent.key, sent.group, sent.args) == ("acme", "pump-1", None, {"a": 1})
    group = parse_send({"group": "floor-2", "name": "blink", "timeout_ms": 500}, ADMIN)
    assert (group.key, group.group, group.timeout_ms) == ("group:floor-2", "floor-2", 500)
    bad = [
        [],
        {"name": "x"},
        {"device": "a", "group": "b", "name": "x"},
        {"device": "bad id!", "name": "x"},
        {"device": "a", "name": ""},
        {"device": "a", "name": "x", "args": [1]},
        {"device": "a", "name": "x", "timeout_ms": 0},
        {"device": "a", "name": "x", "timeout_ms": True},
        {"device": "a", "name": "x", "reply_expected": "no"},
        {"device": "a", "name": "x", "tenant": 3},
    ]
    for body in bad:
        with pytest.raises(ApiError) as err:
            parse_send(body, ADMIN)
        assert err.value.status == 400, body
    with pytest.raises(ApiError) as err:
        parse_send({"device": "a", "name": "x", "tenant": "beta"}, ACME_API)
    assert err.value.status == 404


def test_query_numbers() -> None:
    assert parse_seconds(None, "wait", 60) == 0
    assert parse_seconds("2.5", "wait", 60) == 2.5
    assert parse_seconds("600", "wait", 60) == 60
    for text in ("-1", "x", "nan"):
        with pytest.raises(ApiError):
            parse_seconds(text, "wait", 60)
    assert parse_ms("123", "since") == 123
    assert parse_ms(None, "since") is None
    with pytest.raises(ApiError):
        parse_ms("-5", "since")
    assert parse_limit(None, 100, 1000) == 100
    assert parse_limit("5000", 100, 1000) == 1000
    with pytest.raises(ApiError):
        parse_limit("0", 100, 1000)


def _entry(cid: str, tenant: str | None, device: str, state: str, at: int) -> dict[str, object]:
    return {"command_id": cid, "tenant": tenant, "device_id": device, "state": state, "at": at,
            "states": [{"state": state, "at": at}], "replies": []}  # fmt: skip


def test_command_filter_and_visibility() -> None:
    entries = [
        _entry("a", "acme", "pump-1", "succeeded", 100),
        _entry("b", "acme", "pump-2", "failed", 200),
        _entry("c", "beta", "pump-1", "succeeded", 300),
        _entry("d", None, "x", "rejected", 400),
    ]
    every = CommandFilter()
    assert [r["command_id"] for r in visible_commands(entries, ACME_API, every, 10)] == ["b", "a"]
    assert [r["command_id"] for r in visible_commands(entries, ADMIN, every, 10)] == [
        "d", "c", "b", "a"
    ]  # fmt: skip
    assert [r["command_id"] for r in visible_commands(entries, ADMIN, every, 2)] == ["d", "c"]
    by_device = CommandFilter(device="pump-1", state="succeeded")
    assert [r["command_id"] for r in visible_commands(entries, ADMIN, by_device, 10)] == [
        "c", "a"
    ]  # fmt: skip
    window = CommandFilter(since_ms=150, until_ms=300)
    assert [r["command_id"] for r in visible_commands(entries, ADMIN, window, 10)] == ["c", "b"]
    with pytest.raises(ApiError):
        CommandFilter(state="bogus")


def test_views() -> None:
    view = command_view(_entry("a", "acme", "group:g", "succeeded", 5))
    assert view["final"] is True
    assert view["target"] == "group:g"
    assert command_view({"command_id": "x"})["final"] is False
    assert status_tenant({"command": {"name": "n"}}) == "default"
    assert status_tenant({"command": {"name": "n", "tenant": "acme"}}) == "acme"
    assert status_tenant({"state": "rejected"}) is None
    device = SimpleNamespace(tenant="acme", id="p", groups=("g",), disabled=False,
                             credentials=SimpleNamespace(kinds=("secret",)), site=None,
                             created_at=1, updated_at=2)  # fmt: skip
    row = device_view(device, {"online": True, "last_seen": 9})
    assert (row["online"], row["last_seen"], row["groups"]) == (True, 9, ["g"])
    assert presence_matches(row, "online")
    assert not presence_matches(row, "offline")
    assert presence_matches(row, None)
    with pytest.raises(ApiError):
        presence_matches(row, "maybe")
    assert groups_of(None) == []
    assert groups_of([" a ", "", "b"]) == ["a", "b"]
    with pytest.raises(ApiError):
        groups_of("a,b")


def test_sse_event() -> None:
    assert sse_event("telemetry", "0:5", b'{"a":1}') == (
        b'event: telemetry\nid: 0:5\ndata: {"a":1}\n\n'
    )
