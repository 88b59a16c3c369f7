import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.mapping import ErrorCode, KafkaRecord, Topics, map_message

TOPICS = Topics(telemetry="t.tel", events="t.ev", dlq="t.dlq", presence="t.pres")
LIMIT = 1024


def m(topic: str, payload: bytes, qos: int = 1) -> KafkaRecord:
    return map_message(
        topic, payload, qos, 1_700_000_000_123, topics=TOPICS, max_payload_bytes=LIMIT
    )


def hdr(rec: KafkaRecord) -> dict[str, bytes]:
    return dict(rec.headers)


def test_good_telemetry_keeps_bytes_and_headers() -> None:
    payload = (
        b'{"ts": 1700000000000, "seq": 7, "metrics": {"t": 21.5, "h": 40}, "tags": {"s": "x"}}'
    )
    rec = m("devices/d1/telemetry", payload)
    assert rec.error is None
    assert rec.topic == "t.tel"
    assert rec.key == b"d1"
    assert rec.value == payload
    assert hdr(rec) == {
        "mqtt_topic": b"devices/d1/telemetry",
        "received_at": b"1700000000123",
        "qos": b"1",
    }


def test_good_event_and_matching_device_id() -> None:
    payload = b'{"ts": 1, "seq": 0, "type": "door_open", "data": {"x": 1}, "device_id": "d2"}'
    rec = m("devices/d2/events", payload, qos=0)
    assert (rec.topic, rec.key, rec.error, hdr(rec)["qos"]) == ("t.ev", b"d2", None, b"0")


@pytest.mark.parametrize(
    ("payload", "online"),
    [(b"online", True), (b"offline", False), (b'"online"', True), (b"offline\n", False)],
)
def test_presence(payload: bytes, online: bool) -> None:
    rec = m("devices/d3/status", payload)
    assert rec.topic == "t.pres"
    assert rec.key == b"d3"
    assert orjson.loads(rec.value) == {"online": online, "at": 1_700_000_000_123}


@pytest.mark.parametrize(
    ("topic", "payload", "code", "key"),
    [
        ("devices/d1/telemetry", b"not json", ErrorCode.NOT_JSON, b"d1"),
        ("devices/d1/telemetry", b"\xff\xfe", ErrorCode.NOT_JSON, b"d1"),
        ("devices/d1/telemetry", b"", ErrorCode.NOT_JSON, b"d1"),
        ("devices/d1/telemetry", b"[1, 2]", ErrorCode.NOT_OBJECT, b"d1"),
        ("devices/d1/telemetry", b'"str"', ErrorCode.NOT_OBJECT, b"d1"),
        ("devices/d1/telemetry", b'{"seq": 1, "metrics": {}}', ErrorCode.MISSING_FIELD, b"d1"),
        ("devices/d1/telemetry", b'{"ts": 1, "metrics": {}}', ErrorCode.MISSING_FIELD, b"d1"),
        ("devices/d1/telemetry", b'{"ts": 1, "seq": 1}', ErrorCode.MISSING_FIELD, b"d1"),
        (
            "devices/d1/telemetry",
            b'{"ts": "1", "seq": 1, "metrics": {}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1.5, "seq": 1, "metrics": {}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": true, "seq": 1, "metrics": {}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": -1, "metrics": {}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": []}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": "x"}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": true}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": null}}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {}, "tags": 3}',
            ErrorCode.WRONG_TYPE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": NaN}}',
            ErrorCode.NON_FINITE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": Infinity}}',
            ErrorCode.NON_FINITE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {"a": 1e999}}',
            ErrorCode.NON_FINITE,
            b"d1",
        ),
        (
            "devices/d1/telemetry",
            b'{"ts": 1, "seq": 1, "metrics": {}, "device_id": "d2"}',
            ErrorCode.DEVICE_MISMATCH,
            b"d1",
        ),
        ("devices/d1/events", b'{"ts": 1, "seq": 1}', ErrorCode.MISSING_FIELD, b"d1"),
        ("devices/d1/events", b'{"ts": 1, "seq": 1, "type": 5}', ErrorCode.WRONG_TYPE, b"d1"),
        ("devices/d1/events", b'{"ts": 1, "seq": 1, "type": ""}', ErrorCode.WRONG_TYPE, b"d1"),
        ("devices/d1/status", b"maybe", ErrorCode.BAD_STATUS, b"d1"),
        ("devices/d1/telemetry/x", b"{}", ErrorCode.BAD_TOPIC, b"d1"),
        ("devices/bad id/telemetry", b"{}", ErrorCode.BAD_TOPIC, None),
        ("elsewhere", b"{}", ErrorCode.BAD_TOPIC, None),
        ("devices/d1/telemetry", b"x" * (LIMIT + 1), ErrorCode.OVERSIZED, b"d1"),
    ],
)
def test_rejections_go_to_dlq_untouched(
    topic: str, payload: bytes, code: ErrorCode, key: bytes | None
) -> None:
    rec = m(topic, payload)
    assert rec.error is code
    assert rec.topic == "t.dlq"
    assert rec.key == key
    assert rec.value == payload
    h = hdr(rec)
    assert h["error"] == code.value.encode()
    assert h["mqtt_topic"] == topic.encode()
    assert h["received_at"] == b"1700000000123"
    assert h["error_detail"]


def test_limit_is_inclusive() -> None:
    body = b'{"ts": 1, "seq": 1, "metrics": {}, "tags": {"p": "'
    payload = body + b"x" * (LIMIT - len(body) - 3) + b'"}}'
    assert len(payload) == LIMIT
    assert m("devices/d1/telemetry", payload).error is None


device_ids = st.from_regex(r"[A-Za-z0-9_.:-]{1,128}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(
    topic=st.one_of(st.text(max_size=40), device_ids.map(lambda d: f"devices/{d}/telemetry")),
    payload=st.binary(max_size=2000),
    qos=st.integers(0, 2),
)
def test_property_never_raises_on_arbitrary_input(topic: str, payload: bytes, qos: int) -> None:
    rec = m(topic, payload, qos)
    assert rec.topic in ("t.tel", "t.ev", "t.pres", "t.dlq")
    assert (rec.error is None) == (rec.topic != "t.dlq")


@settings(max_examples=300, deadline=None)
@given(
    device_id=device_ids,
    channel=st.sampled_from(["telemetry", "events", "status"]),
    doc=json_values,
)
def test_property_key_is_always_the_device_id(device_id: str, channel: str, doc: object) -> None:
    import json

    payload = json.dumps(doc).encode()
    rec = m(f"devices/{device_id}/{channel}", payload)
    assert rec.key == device_id.encode()
    if rec.error is None and channel != "status":
        assert rec.value == payload


finite = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(
    device_id=device_ids,
    ts=st.integers(0, 2**62),
    seq=st.integers(0, 2**62),
    metrics=st.dictionaries(st.text(max_size=10), finite, max_size=8),
)
def test_property_valid_telemetry_accepted(
    device_id: str, ts: int, seq: int, metrics: dict[str, float]
) -> None:
    payload = orjson.dumps({"ts": ts, "seq": seq, "metrics": metrics})
    rec = m(f"devices/{device_id}/telemetry", payload)
    assert rec.error is None, rec.detail
    assert rec.topic == "t.tel"
    back = orjson.loads(rec.value)
    assert back["seq"] == seq
    assert all(math.isfinite(v) for v in back["metrics"].values())


def test_tenant_records_go_to_the_tenants_topics_with_a_tenant_header() -> None:
    good = orjson.dumps({"ts": 1, "seq": 0, "metrics": {"t": 1.5}})
    default = m("devices/p-1/telemetry", good)
    acme = m("tenants/acme/devices/p-1/telemetry", good)
    assert (default.topic, default.tenant) == ("t.tel", "default")
    assert "tenant" not in hdr(default)  # the default tenant's records are as they were
    assert (acme.topic, acme.key, acme.value, acme.tenant) == ("t.acme.tel", b"p-1", good, "acme")
    assert hdr(acme) == hdr(default) | {
        "mqtt_topic": b"tenants/acme/devices/p-1/telemetry",
        "tenant": b"acme",
    }
    assert m("tenants/acme/devices/p-1/events", b'{"ts":1,"seq":1,"type":"door"}').topic == (
        "t.acme.ev"
    )
    pres = m("tenants/acme/devices/p-1/status", b"online")
    assert (pres.topic, hdr(pres)["tenant"]) == ("t.acme.pres", b"acme")
    bad = m("tenants/acme/devices/p-1/telemetry", b"{nope")
    assert (bad.topic, bad.error, hdr(bad)["tenant"]) == ("t.acme.dlq", ErrorCode.NOT_JSON, b"acme")
    # a root that names no tenant is a bad topic of nobody's: the default DLQ, no tenant header
    for topic in ("tenants/default/devices/p-1/telemetry", "tenants/A!/devices/p-1/telemetry"):
        rec = m(topic, good)
        assert (rec.topic, rec.error, rec.tenant) == ("t.dlq", ErrorCode.BAD_TOPIC, "default")
        assert "tenant" not in hdr(rec)
