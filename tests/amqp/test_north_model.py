"""Northbound addresses, rights, offsets and command messages (amqp.north_model, pure)."""

from __future__ import annotations

import pytest

from amqp.model import Account, Cond, Refusal
from amqp.north_model import (
    AppCommand,
    CommandTarget,
    PartitionOffsets,
    Record,
    ReplySource,
    StreamSource,
    group_id,
    north_refusal,
    parse_command,
    parse_source,
    parse_target,
    reply_message,
    stream_properties,
)
from api.http_devices.model import DeviceRef
from api.plumbing.access import Access, Principal
from bridge.topics import Channel
from registry.model import Role, TopicAcl

TENANTS = frozenset({"default", "acme", "beta"})


def test_sources_and_targets() -> None:
    assert parse_source("telemetry/acme") == StreamSource(Channel.TELEMETRY, "acme")
    assert parse_source("event/default") == StreamSource(Channel.EVENTS, "default")
    assert parse_source("command_response/acme/r-1") == ReplySource("acme", "r-1")
    assert parse_source("command_response/acme/r-1").address == "command_response/acme/r-1"  # type: ignore[union-attr]
    for bad in ("telemetry/Bad Tenant", "telemetry/a/b", "command_response/acme"):
        found = parse_source(bad)
        assert isinstance(found, Refusal)
        assert found.condition is Cond.NOT_FOUND, bad
    for other in (None, "", "command", "command/acme/pump-1", "telemetry", "queue/x"):
        assert parse_source(other) is None, other
    assert parse_target("command/acme") == CommandTarget("acme")
    assert isinstance(parse_target("command/a/b"), Refusal)
    for other in (None, "telemetry", "command", "command_response/acme/p/c"):
        assert parse_target(other) is None, other


def refusal(principal: object, caller: Principal | None, tenant: str, **kw: object) -> object:
    found = north_refusal(
        principal, caller, tenant=tenant, topic=kw.get("topic", f"iot.{tenant}.telemetry"),  # type: ignore[arg-type]
        access=Access.READ, acl=kw.get("acl"), tenants=TENANTS,  # type: ignore[arg-type]
    )  # fmt: skip
    return None if found is None else found.condition


def test_rights_are_iot_apis_own() -> None:
    app = Principal("svc/app", "account", (Role.API,), "acme")
    system = Principal("svc/ops", "account", (Role.OPERATOR,), None)
    assert refusal(Account("app"), app, "acme") is None
    assert refusal(Account("app"), app, "beta") is Cond.UNAUTHORIZED
    assert refusal(Account("ops"), system, "beta") is None
    assert refusal(Account("ops"), system, "nobody") is Cond.NOT_FOUND
    assert refusal(DeviceRef("acme", "pump-1"), None, "acme") is Cond.UNAUTHORIZED
    assert refusal(Account("viewer"), None, "acme") is Cond.UNAUTHORIZED  # no pub/sub role
    closed = TopicAcl("iot.acme.telemetry", "acme", readers=("svc/other",))
    assert refusal(Account("app"), app, "acme", acl=closed) is Cond.UNAUTHORIZED
    anonymous = north_refusal(None, None, tenant="beta", topic="iot.beta.telemetry",
                              access=Access.READ, acl=None, tenants=None)  # fmt: skip
    assert anonymous is None


def test_group_per_tenant_channel_and_link_name() -> None:
    assert group_id(StreamSource(Channel.EVENTS, "acme"), "dash") == "iot-amqp.acme.events.dash"


def test_offsets_commit_only_past_settled_records() -> None:
    offsets = PartitionOffsets(10)
    for offset in (10, 11, 12):
        offsets.sent(offset)
    assert not offsets.done(11)  # 10 is still out
    assert offsets.committable == 10
    assert offsets.done(10)
    assert offsets.committable == 12
    assert not offsets.done(99)  # never sent here (another owner's)
    assert offsets.done(12)
    assert offsets.committable == 13


def test_stream_properties() -> None:
    rec = Record(0, 5, 1, b"pump-1", b"{}", 1_700_000_000_000,
                 (("orig_adapter", b"amqp"), ("qos", b"1")))  # fmt: skip
    assert stream_properties(rec, "acme") == {
        "device_id": "pump-1", "tenant_id": "acme", "orig_adapter": "amqp",
    }  # fmt: skip


def command(**fields: object) -> AppCommand | Refusal:
    base: dict[str, object] = {
        "to": "command/acme/pump-1", "subject": "reboot", "correlation_id": "c-1",
        "message_id": None, "reply_to": "command_response/acme/r1", "body": b'{"delay": 1}',
        "ttl_s": 30.0,
    }  # fmt: skip
    base.update(fields)
    return parse_command(CommandTarget("acme"), **base)  # type: ignore[arg-type]


def test_command_messages() -> None:
    assert command() == AppCommand("acme", "pump-1", "reboot", "c-1", {"delay": 1},
                                   ReplySource("acme", "r1"), 30000)  # fmt: skip
    one_way = command(reply_to=None, body=b"", correlation_id=None, message_id=7, ttl_s=None)
    assert one_way == AppCommand("acme", "pump-1", "reboot", "7")


@pytest.mark.parametrize(
    ("fields", "condition", "code"),
    [
        ({"to": "command/beta/pump-1"}, Cond.UNAUTHORIZED, None),
        ({"to": None}, Cond.NOT_FOUND, None),
        ({"to": "command/acme/a/b"}, Cond.NOT_FOUND, None),
        ({"subject": None}, Cond.BAD_REQUEST, "bad_name"),
        ({"subject": "a/b"}, Cond.BAD_REQUEST, "bad_name"),
        ({"correlation_id": "a b"}, Cond.BAD_REQUEST, "bad_id"),
        ({"body": b"[1]"}, Cond.BAD_REQUEST, "not_object"),
        ({"body": b"{"}, Cond.BAD_REQUEST, "not_json"),
        ({"reply_to": "command_response/beta/r1"}, Cond.BAD_REQUEST, "bad_reply_to"),
    ],
)
def test_bad_commands(fields: dict[str, object], condition: Cond, code: str | None) -> None:
    found = command(**fields)
    assert isinstance(found, Refusal)
    assert found.condition is condition
    assert found.info.get("code") == code


def test_replies_as_hono_status() -> None:
    assert reply_message({"status": "ok", "result": {"a": 1}}) == (200, b'{"a":1}',
                                                                   "application/json")  # fmt: skip
    assert reply_message({"status": "error", "error": "no"}) == (500, b"no", "text/plain")
    assert reply_message({"status": None, "raw": "junk"}) == (400, b"junk", "text/plain")
