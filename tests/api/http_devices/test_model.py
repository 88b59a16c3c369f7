from __future__ import annotations

import orjson
import pytest

from api.http_devices.model import (
    ADAPTER_HEADER,
    DeviceRef,
    ReplyError,
    TtdError,
    command_filters,
    command_id_ok,
    command_of,
    map_http,
    over_quota,
    parse_device_user,
    parse_ttd,
    path_device,
    reply_payload,
    reply_topic,
)
from bridge.mapping import ErrorCode, Topics, map_message
from bridge.topics import Channel

TOPICS = Topics("tel", "ev", "dlq", "pres")
GOOD = b'{"ts": 5, "seq": 1, "metrics": {"t": 21.5}}'


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("pump-1", DeviceRef("default", "pump-1")),
        ("acme/pump-1", DeviceRef("acme", "pump-1")),
        ("pump-1@acme", DeviceRef("acme", "pump-1")),
        ("pump-1@default", DeviceRef("default", "pump-1")),
        ("a.b:c_d-1", DeviceRef("default", "a.b:c_d-1")),
        ("svc/bridge", None),  # a service account is no device
        ("default/pump-1", None),  # the default tenant has no tenants/ spelling
        ("Acme/pump-1", None),
        ("acme/pump/1", None),
        ("acme/pump-1@beta", None),
        ("pump 1", None),
        ("", None),
        ("pump-1@", None),
    ],
)
def test_device_user_names(user: str, expected: DeviceRef | None) -> None:
    assert parse_device_user(user) == expected


def test_username_round_trips() -> None:
    for ref in (DeviceRef("default", "p"), DeviceRef("acme", "p")):
        assert parse_device_user(ref.username) == ref
    assert path_device("acme", "p") == DeviceRef("acme", "p")
    assert path_device("ACME", "p") is None
    assert path_device("acme", "p/q") is None


def test_a_good_upload_is_the_bridges_record_plus_the_adapter_header() -> None:
    for ref, topic in (
        (DeviceRef("default", "pump-1"), "devices/pump-1/telemetry"),
        (DeviceRef("acme", "pump-1"), "tenants/acme/devices/pump-1/telemetry"),
    ):
        rec = map_http(ref, Channel.TELEMETRY, GOOD, 1234, topics=TOPICS, max_payload_bytes=100)
        bridge = map_message(topic, GOOD, 1, 1234, topics=TOPICS, max_payload_bytes=100)
        assert (rec.topic, rec.key, rec.value, rec.error) == (
            bridge.topic,
            bridge.key,
            bridge.value,
            None,
        )
        assert rec.headers == [*bridge.headers, ADAPTER_HEADER]
    acme = map_http(
        DeviceRef("acme", "pump-1"), Channel.EVENTS, b'{"ts":1,"seq":0,"type":"x"}', 9,
        topics=TOPICS, max_payload_bytes=100,
    )  # fmt: skip
    assert acme.topic == "ev.acme"
    assert ("tenant", b"acme") in acme.headers
    assert dict(acme.headers)["mqtt_topic"] == b"tenants/acme/devices/pump-1/events"


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"nope", ErrorCode.NOT_JSON),
        (b'{"ts": 1}', ErrorCode.MISSING_FIELD),
        (b'{"ts": 1, "seq": 0, "metrics": {}, "device_id": "x"}', ErrorCode.DEVICE_MISMATCH),
        (b"x" * 101, ErrorCode.OVERSIZED),
    ],
)
def test_a_bad_upload_is_the_bridges_dlq_record(payload: bytes, code: ErrorCode) -> None:
    ref = DeviceRef("default", "pump-1")
    rec = map_http(ref, Channel.TELEMETRY, payload, 7, topics=TOPICS, max_payload_bytes=100)
    assert (rec.topic, rec.key, rec.value, rec.error) == ("dlq", b"pump-1", payload, code)
    headers = dict(rec.headers)
    assert headers["error"] == code.value.encode()
    assert headers["orig_adapter"] == b"http"


def test_over_quota_goes_to_the_tenants_dlq() -> None:
    rec = over_quota(DeviceRef("acme", "p"), Channel.TELEMETRY, GOOD, 3, topics=TOPICS, rate=2)
    assert (rec.topic, rec.key, rec.error) == ("dlq.acme", b"p", ErrorCode.QUOTA_EXCEEDED)
    assert rec.detail == "tenant 'acme' over its quota of 2 msgs/s"
    assert ("tenant", b"acme") in rec.headers


@pytest.mark.parametrize(
    ("text", "expected"),
    [(None, 0.0), ("", 0.0), ("0", 0.0), ("5", 5.0), ("600", 60.0), ("-1", 60.0)],
)
def test_ttd(text: str | None, expected: float) -> None:
    assert parse_ttd(text, 60.0) == expected


@pytest.mark.parametrize("text", ["abc", "-2", "1.5"])
def test_bad_ttd(text: str) -> None:
    with pytest.raises(TtdError):
        parse_ttd(text, 60.0)


def test_a_command_publish_as_the_http_answer_carries_it() -> None:
    cmd = command_of(
        "tenants/acme/devices/p/commands/reboot",
        b'{"command_id":"c-1"}',
        [("command_id", "c-1"), ("attempt", "2")],
        b"c-1",
    )
    assert cmd is not None
    assert cmd.headers() == {
        "hono-command": "reboot",
        "hono-cmd-req-id": "c-1",
        "iot-cmd-attempt": "2",
        "iot-cmd-topic": "tenants/acme/devices/p/commands/reboot",
    }
    # correlation data alone names it too; a group broadcast is a command as well
    by_corr = command_of("groups/g/commands/ping", b"{}", [], b"c-2")
    assert by_corr is not None
    assert (by_corr.name, by_corr.command_id, by_corr.attempt) == ("ping", "c-2", "1")
    assert command_of("devices/p/commands/reboot", b"{}", [], None) is None  # no id
    assert command_of("devices/p/telemetry", b"{}", [("command_id", "c")], None) is None
    assert command_of("devices/p/commands/a/b", b"{}", [("command_id", "c")], None) is None
    assert command_of("devices/p/commands/x", b"{}", [("command_id", "a/b")], None) is None


def test_topics_of_a_device() -> None:
    acme = DeviceRef("acme", "p")
    assert command_filters(acme, ("g1",)) == (
        "tenants/acme/devices/p/commands/#",
        "tenants/acme/groups/g1/commands/#",
    )
    assert command_filters(DeviceRef("default", "p"), ()) == ("devices/p/commands/#",)
    assert reply_topic(acme, "c-1") == "tenants/acme/devices/p/replies/c-1"
    assert command_id_ok("c-1")
    assert not command_id_ok("a/b")
    assert not command_id_ok("+")


def test_reply_payloads() -> None:
    reply = b'{"status": "ok", "result": 1}'
    assert reply_payload(reply, None) is reply  # the MQTT contract as it is
    assert reply_payload(reply, "500") is reply  # already a reply: kept
    assert orjson.loads(reply_payload(b'{"a": 1}', "200")) == {"status": "ok", "result": {"a": 1}}
    assert orjson.loads(reply_payload(b"", "204")) == {"status": "ok", "result": None}
    assert orjson.loads(reply_payload(b"broken", "503")) == {"status": "error", "error": "broken"}
    assert orjson.loads(reply_payload(b"", "400")) == {"status": "error", "error": "400"}
    for bad in ("x", "99", "600"):
        with pytest.raises(ReplyError):
            reply_payload(b"", bad)
