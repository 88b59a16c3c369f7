"""The AMQP door's pure rules: log-in names, addresses, who may send as whom, bodies, records
(byte for byte the bridge's plus `orig_adapter: amqp`) and outcomes."""

from __future__ import annotations

import orjson
import pytest

from amqp.model import (
    Account,
    Cond,
    Outcome,
    Refusal,
    UploadAddress,
    check_receiver_attach,
    check_upload_attach,
    map_amqp,
    parse_authcid,
    parse_plain,
    parse_upload_address,
    payload_of,
    quota_record,
    settle_outcome,
    upload_device,
)
from api.http_devices.model import DeviceRef
from bridge.mapping import ErrorCode, Topics, map_message
from bridge.topics import Channel

TOPICS = Topics()
GOOD = orjson.dumps({"ts": 1_700_000_000_000, "seq": 1, "metrics": {"t": 20.5}})
EVENT = orjson.dumps({"ts": 1_700_000_000_000, "seq": 2, "type": "door_open"})


@pytest.mark.parametrize(
    ("authcid", "who"),
    [
        ("pump-1", DeviceRef("default", "pump-1")),
        ("acme/pump-1", DeviceRef("acme", "pump-1")),
        ("pump-1@acme", DeviceRef("acme", "pump-1")),
        ("svc/app", Account("app")),
        ("svc/", None),
        ("svc/a/b", None),
        ("a/b/c", None),
        ("", None),
    ],
)
def test_login_names(authcid: str, who: DeviceRef | Account | None) -> None:
    assert parse_authcid(authcid) == who


def test_plain_response() -> None:
    assert parse_plain(b"\0pump-1\0s3cret") == ("", "pump-1", "s3cret")
    assert parse_plain(b"z\0u\0p") == ("z", "u", "p")
    assert parse_plain(b"\0\0p") is None
    assert parse_plain(b"user-pass") is None
    assert parse_plain(b"\0\xff\0p") is None


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("telemetry", UploadAddress(Channel.TELEMETRY)),
        ("t", UploadAddress(Channel.TELEMETRY)),
        ("event", UploadAddress(Channel.EVENTS)),
        ("e", UploadAddress(Channel.EVENTS)),
        ("telemetry/acme/pump-1", UploadAddress(Channel.TELEMETRY, "acme", "pump-1")),
        ("event//pump-1", UploadAddress(Channel.EVENTS, None, "pump-1")),
    ],
)
def test_upload_addresses(address: str, parsed: UploadAddress) -> None:
    assert parse_upload_address(address) == parsed


@pytest.mark.parametrize("address", [None, "", "queue/x", "telemetry/acme", "t/a/b/c", "tele"])
def test_unknown_addresses_are_not_found(address: str | None) -> None:
    found = parse_upload_address(address)
    assert isinstance(found, Refusal)
    assert found.condition is Cond.NOT_FOUND


def test_a_device_sends_only_as_itself() -> None:
    me = DeviceRef("acme", "pump-1")
    assert upload_device(me, UploadAddress(Channel.TELEMETRY)) == me
    assert upload_device(me, UploadAddress(Channel.TELEMETRY, "acme", "pump-1")) == me
    assert upload_device(me, UploadAddress(Channel.TELEMETRY, None, "pump-1")) == me
    for other in (
        UploadAddress(Channel.TELEMETRY, "acme", "pump-2"),
        UploadAddress(Channel.TELEMETRY, "beta", "pump-1"),
        UploadAddress(Channel.EVENTS, None, "pump-2"),
    ):
        refused = upload_device(me, other)
        assert isinstance(refused, Refusal)
        assert refused.condition is Cond.UNAUTHORIZED
    account = upload_device(Account("app"), UploadAddress(Channel.TELEMETRY, "acme", "pump-1"))
    assert isinstance(account, Refusal)
    assert account.condition is Cond.UNAUTHORIZED


def test_anonymous_mode_needs_the_device_in_the_address() -> None:
    named = upload_device(None, UploadAddress(Channel.TELEMETRY, "acme", "pump-1"))
    assert named == DeviceRef("acme", "pump-1")
    unnamed = upload_device(None, UploadAddress(Channel.TELEMETRY))
    assert isinstance(unnamed, Refusal)
    assert unnamed.condition is Cond.NOT_FOUND
    bad = upload_device(None, UploadAddress(Channel.TELEMETRY, "acme", "no+such"))
    assert isinstance(bad, Refusal)
    assert bad.condition is Cond.NOT_FOUND


def test_attach_rules() -> None:
    assert check_upload_attach(None, 0) is None
    assert check_upload_attach("telemetry", 0) is None
    second = check_upload_attach(None, 1)
    assert second is not None
    assert second.condition is Cond.NOT_IMPLEMENTED
    unknown = check_upload_attach("queue/jobs", 0)
    assert unknown is not None
    assert unknown.condition is Cond.NOT_FOUND
    assert check_receiver_attach("command").condition is Cond.NOT_FOUND


def test_bodies() -> None:
    assert payload_of(b"\x00\x01") == b"\x00\x01"
    assert payload_of(memoryview(b"ab")) == b"ab"
    assert payload_of('{"a": "é"}') == '{"a": "é"}'.encode()
    for bad in ({"ts": 1}, [1, 2], 7, None):
        refused = payload_of(bad)
        assert isinstance(refused, Refusal)
        assert refused.condition is Cond.BAD_REQUEST
        assert refused.info == {"code": "bad_body"}


def test_records_are_the_bridges_plus_the_adapter_header() -> None:
    ref = DeviceRef("acme", "pump-1")
    rec = map_amqp(ref, Channel.TELEMETRY, GOOD, 1234, presettled=False, topics=TOPICS,
                   max_payload_bytes=65536)  # fmt: skip
    bridge = map_message("tenants/acme/devices/pump-1/telemetry", GOOD, 1, 1234, topics=TOPICS,
                         max_payload_bytes=65536)  # fmt: skip
    assert (rec.topic, rec.key, rec.value) == (bridge.topic, bridge.key, bridge.value)
    assert rec.topic == "iot.acme.telemetry"
    assert rec.headers == [*bridge.headers, ("orig_adapter", b"amqp")]
    pre = map_amqp(ref, Channel.TELEMETRY, GOOD, 1234, presettled=True, topics=TOPICS,
                   max_payload_bytes=65536)  # fmt: skip
    assert dict(pre.headers)["qos"] == b"0"


def test_bad_payloads_dead_letter_and_are_rejected_with_the_bridges_code() -> None:
    ref = DeviceRef("default", "pump-1")
    rec = map_amqp(ref, Channel.TELEMETRY, b"{not json", 1, presettled=False, topics=TOPICS,
                   max_payload_bytes=65536)  # fmt: skip
    assert rec.topic == "iot.dlq"
    assert rec.error is ErrorCode.NOT_JSON
    assert ("orig_adapter", b"amqp") in rec.headers
    outcome, refusal = settle_outcome(rec, True)
    assert outcome is Outcome.REJECTED
    assert refusal is not None
    assert refusal.condition is Cond.BAD_REQUEST
    assert refusal.info == {"code": "not_json"}
    assert refusal.description.startswith("not_json: ")
    big = map_amqp(ref, Channel.TELEMETRY, GOOD, 1, presettled=False, topics=TOPICS,
                   max_payload_bytes=10)  # fmt: skip
    assert big.error is ErrorCode.OVERSIZED


def test_outcomes() -> None:
    ref = DeviceRef("default", "pump-1")
    rec = map_amqp(ref, Channel.EVENTS, EVENT, 1, presettled=False, topics=TOPICS,
                   max_payload_bytes=65536)  # fmt: skip
    assert rec.topic == "iot.events"
    assert settle_outcome(rec, True) == (Outcome.ACCEPTED, None)
    assert settle_outcome(rec, False) == (Outcome.RELEASED, None)
    quota = quota_record(ref, Channel.EVENTS, GOOD, 1, topics=TOPICS, rate=2)
    assert quota.error is ErrorCode.QUOTA_EXCEEDED
    assert quota.topic == "iot.dlq"
    outcome, refusal = settle_outcome(quota, True)
    assert outcome is Outcome.REJECTED
    assert refusal is not None
    assert refusal.condition is Cond.RESOURCE_LIMIT
    # Kafka did not take the dead letter either: released, the client may resend
    assert settle_outcome(quota, False) == (Outcome.RELEASED, None)
