"""Unit tests: command -> MQTT publish, reply topic and payload parsing."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.mapping import (
    Reply,
    build_publish,
    parse_reply,
    parse_reply_topic,
)
from commands.model import Command, Target


def make(target: Target, *, created_at: int = 0, ttl_ms: int = 9_000) -> Command:
    return Command(
        command_id="cmd-1",
        target=target,
        name="set-rate",
        args={"hz": 5},
        timeout_ms=3_000,
        max_attempts=3,
        reply_expected=True,
        created_at=created_at,
        ttl_ms=ttl_ms,
    )


def test_device_publish() -> None:
    pub = build_publish(make(Target(device_id="d-7")), attempt=2, now_ms=1_500)
    assert pub is not None
    assert pub.topic == "devices/d-7/commands/set-rate"
    assert pub.qos == 1
    assert orjson.loads(pub.payload) == {"hz": 5, "command_id": "cmd-1"}
    assert pub.correlation_data == b"cmd-1"
    assert pub.response_topic == "devices/d-7/replies/cmd-1"
    assert pub.message_expiry_s == 8  # 7.5 s left, rounded up
    assert dict(pub.user_properties) == {"command_id": "cmd-1", "attempt": "2"}


def test_group_publish_has_no_single_response_topic() -> None:
    pub = build_publish(make(Target(group="floor2")), attempt=1, now_ms=0)
    assert pub is not None
    assert pub.topic == "groups/floor2/commands/set-rate"
    assert pub.response_topic is None


def test_no_publish_after_ttl() -> None:
    assert build_publish(make(Target(device_id="d")), attempt=1, now_ms=9_000) is None


@given(created=st.integers(0, 10**12), ttl=st.integers(1, 10**8), elapsed=st.integers(0, 10**8))
def test_expiry_never_shorter_than_remaining_ttl(created: int, ttl: int, elapsed: int) -> None:
    cmd = make(Target(device_id="d"), created_at=created, ttl_ms=ttl)
    pub = build_publish(cmd, attempt=1, now_ms=created + elapsed)
    remaining = ttl - elapsed
    if remaining <= 0:
        assert pub is None
    else:
        assert pub is not None
        assert pub.message_expiry_s * 1000 >= remaining
        assert (pub.message_expiry_s - 1) * 1000 < remaining


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("devices/d1/replies/c1", ("d1", "c1")),
        ("devices/d1/replies", None),
        ("devices/d1/replies/c1/x", None),
        ("devices/d1/telemetry/c1", None),
        ("groups/d1/replies/c1", None),
        ("devices//replies/c1", None),
        ("devices/d1/replies/c 1", None),
    ],
)
def test_parse_reply_topic(topic: str, expected: tuple[str, str] | None) -> None:
    assert parse_reply_topic(topic) == expected


def test_parse_reply_ok_and_error() -> None:
    ok = parse_reply("d", "c", b'{"status": "ok", "result": {"v": 3}}')
    assert (ok.ok, ok.result, ok.error) == (True, {"v": 3}, None)
    err = parse_reply("d", "c", b'{"status": "error", "error": "busy"}')
    assert (err.ok, err.error) == (False, "busy")


@pytest.mark.parametrize(
    "payload",
    [b"nope", b"[]", b'{"status": "maybe"}', b'{"result": 1}', b'{"status":"ok","command_id":"x"}'],
)
def test_parse_reply_invalid(payload: bytes) -> None:
    reply = parse_reply("d", "c", payload)
    assert reply.ok is None
    assert reply.error
    assert reply.raw == payload


@given(st.binary(max_size=200))
def test_parse_reply_never_raises(payload: bytes) -> None:
    assert isinstance(parse_reply("d", "c", payload), Reply)


def test_a_tenants_command_and_reply_topics_stay_under_its_root() -> None:
    from dataclasses import replace

    from commands.mapping import parse_tenant_reply_topic

    acme = replace(make(Target(device_id="pump-1")), tenant="acme")
    pub = build_publish(acme, attempt=1, now_ms=0)
    assert pub is not None
    assert pub.topic == "tenants/acme/devices/pump-1/commands/set-rate"
    assert pub.response_topic == "tenants/acme/devices/pump-1/replies/cmd-1"
    group = build_publish(replace(make(Target(group="g1")), tenant="acme"), attempt=1, now_ms=0)
    assert group is not None
    assert group.topic == "tenants/acme/groups/g1/commands/set-rate"
    assert parse_tenant_reply_topic("devices/d1/replies/c1") == ("default", "d1", "c1")
    assert parse_tenant_reply_topic("tenants/acme/devices/d1/replies/c1") == ("acme", "d1", "c1")
    for bad in (
        "tenants/default/devices/d1/replies/c1",
        "tenants/ACME/devices/d1/replies/c1",
        "tenants/acme/devices/d1/replies",
        "tenants/acme/groups/d1/replies/c1",
    ):
        assert parse_tenant_reply_topic(bad) is None
