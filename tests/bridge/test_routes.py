"""The hot path's shortcut: it accepts exactly what the general mapping maps to a record, and
the records it builds are the general mapping's, byte for byte."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import orjson
import pytest

from bridge.config import BridgeConfig
from bridge.mapping import Topics, map_message, validate_event, validate_telemetry
from bridge.routes import accepts, accepts_payload, orjson_accepts_payload, route_for
from bridge.service import TelemetryBridge

KINDS = {"iot.telemetry": "telemetry", "iot.events": "events", "iot.t1.telemetry": "telemetry"}
READY = frozenset({"default", "t1"})

# (document, accepted as telemetry, accepted as event), for device "d1"
CASES: list[tuple[Any, bool, bool]] = [
    ({"ts": 1, "seq": 0, "metrics": {"a": 1, "b": 2.5}}, True, False),
    ({"ts": 1, "seq": 0, "metrics": {}, "tags": {"x": "y"}, "device_id": "d1"}, True, False),
    ({"ts": 1, "seq": 0, "type": "boot"}, False, True),
    ({"ts": 1, "seq": 0, "type": "boot", "metrics": {"a": 1}}, True, True),
    ({"ts": 1, "seq": 0, "type": ""}, False, False),
    ({"ts": 1, "seq": 0, "type": 5}, False, False),
    ({"ts": 1, "seq": -1, "metrics": {}}, False, False),
    ({"ts": 1.0, "seq": 0, "metrics": {}}, False, False),
    ({"ts": True, "seq": 0, "metrics": {}}, False, False),
    ({"ts": 1, "seq": False, "metrics": {}}, False, False),
    ({"ts": None, "seq": 0, "metrics": {}}, False, False),
    ({"seq": 0, "metrics": {}}, False, False),
    ({"ts": 1, "metrics": {}}, False, False),
    ({"ts": 1, "seq": 0}, False, False),
    ({"ts": 1, "seq": 0, "metrics": []}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {"a": "1"}}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {"a": True}}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {"a": None}}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {"a": float("inf")}}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {"a": float("nan")}}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {}, "tags": []}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {}, "tags": None}, True, False),
    ({"ts": 1, "seq": 0, "metrics": {}, "device_id": "d2"}, False, False),
    ({"ts": 1, "seq": 0, "metrics": {}, "device_id": 7}, False, False),
    ({"ts": 1, "seq": 0, "type": "x", "device_id": None}, False, True),
    ([1, 2], False, False),
    ("text", False, False),
    (None, False, False),
    (3, False, False),
]


def _general(doc: Any, telemetry: bool) -> bool:
    """The general mapping's verdict: valid, and no other device named."""
    bad = validate_telemetry(doc) if telemetry else validate_event(doc)
    return bad is None and doc.get("device_id") in (None, "d1")


@pytest.mark.parametrize(("doc", "as_telemetry", "as_event"), CASES)
def test_accepts_exactly_what_the_general_mapping_maps(
    doc: Any, as_telemetry: bool, as_event: bool
) -> None:
    assert accepts(doc, "d1", True) is as_telemetry
    assert accepts(doc, "d1", False) is as_event
    assert _general(doc, True) is as_telemetry  # the table itself agrees with mapping.py
    assert _general(doc, False) is as_event


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        (b'{"ts":1,"seq":0,"metrics":{"a":1}}', True),
        (b'{"ts":1,"seq":0,"metrics":{"a":NaN}}', False),
        (b'{"ts":1,"seq":0,"metrics":{"a":1e999}}', False),
        (b"nope", False),
        (b"\xff\xfe", False),
        (b"", False),
    ],
)
def test_accepts_payload_parses_first(payload: bytes, accepted: bool) -> None:
    assert accepts_payload(payload, "d1", True) is accepted


# payloads where the typed decoders and orjson could part ways: every one must get the same
# verdict from accepts_payload (typed decoders first) as from orjson + accepts alone
TRICKY = [
    b'{"ts":1,"seq":0,"metrics":{"a":1},"x":"\xff\xfe"}',  # bad UTF-8 in a skipped field
    b'{"ts":1,"seq":0,"metrics":{},"tags":{"a":"\xff"}}',
    b'{"ts":1,"seq":0,"metrics":{"\xc3\xa9":1}}',  # good UTF-8, not ASCII
    b'{"ts":1,"seq":0,"metrics":{},"x":"\\ud800"}',  # a lone surrogate escape
    b'{"ts":123456789012345678901234567890,"seq":0,"metrics":{}}',  # orjson: a float
    b'{"ts":18446744073709551615,"seq":0,"metrics":{}}',  # uint64: orjson keeps an int
    b'{"ts":-9223372036854775809,"seq":0,"metrics":{}}',
    b'{"ts":1,"seq":9223372036854775808,"metrics":{}}',
    b'{"ts":1,"seq":0,"metrics":{"a":123456789012345678901234567890}}',
    b'{"ts":1,"seq":0,"metrics":{"a":' + b"9" * 400 + b"}}",  # orjson: infinity
    b'{"ts":1,"seq":0,"metrics":{"a":1e400}}',
    b'{"ts":1,"seq":0,"metrics":{"a":-1e308,"b":1.7976931348623157e308}}',
    b'{"ts":1,"seq":0,"metrics":{"a":NaN}}',
    b'{"ts":1,"seq":0,"metrics":{"a":Infinity}}',
    b'{"ts":1,"seq":1,"seq":-1,"metrics":{}}',  # duplicate keys: orjson keeps the last
    b'{"ts":1,"seq":-1,"seq":1,"metrics":{}}',
    b'{"ts":1,"seq":0,"metrics":{},"metrics":[]}',
    b'{"ts":1,"seq":0,"type":"a","type":""}',
    b'{"ts":1,"seq":0,"metrics":{}} x',
    b' {"ts":1,"seq":0,"metrics":{},"tags": {}} \n',
    b'{"ts":1E2,"seq":0,"metrics":{}}',
    b'{"ts":01,"seq":0,"metrics":{}}',
    b'{"ts":1.,"seq":0,"metrics":{}}',
    b'{"ts":-0,"seq":-0,"metrics":{"a":-0.0}}',
    b'{"ts":1,"seq":0,"metrics":{},"device_id":null}',
    b'{"ts":1,"seq":0,"metrics":{},"device_id":"d\\u0031"}',  # escaped "d1"
    b'{"ts":1,"seq":0,"metrics":{},"tags":null}',
    b'{"ts":1,"seq":0,"metrics":{},"tags":[1]}',
    b'{"ts":1,"seq":0,"metrics":{},"x":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"ts":1,"seq":0,"type":"boot","metrics":{"a":"x"}}',
    b'\xef\xbb\xbf{"ts":1,"seq":0,"metrics":{}}',  # a byte order mark
    b'{"ts":1,"seq":0,"metrics":{}',
    b"{}",
    b"[]",
    b"null",
]


def _mutants(seed: int, count: int) -> list[bytes]:
    """Valid payloads with one byte changed, inserted or dropped (deterministic)."""
    rng = random.Random(seed)
    bases = [
        b'{"ts":1700000000000,"seq":12,"metrics":{"t":21.5,"h":40},"tags":{"dev":"d1"}}',
        b'{"ts":1,"seq":0,"type":"boot","device_id":"d1"}',
    ]
    alphabet = b'{}[]":,.-+eE0123456789 natrulfsx\\\xff'
    out = []
    for _ in range(count):
        b = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                b[i] = rng.choice(alphabet)
            elif op == 1:
                b.insert(i, rng.choice(alphabet))
            else:
                del b[i]
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("payload", TRICKY + [orjson.dumps(doc) for doc, _, _ in CASES[:-4]])
@pytest.mark.parametrize("telemetry", [True, False])
def test_typed_decoders_never_part_from_orjson(payload: bytes, telemetry: bool) -> None:
    assert accepts_payload(payload, "d1", telemetry) is orjson_accepts_payload(
        payload, "d1", telemetry
    )


def test_typed_decoders_agree_on_mutated_payloads() -> None:
    mutants = _mutants(18, 5000)
    for telemetry in (True, False):
        verdicts = [accepts_payload(p, "d1", telemetry) for p in mutants]
        assert verdicts == [orjson_accepts_payload(p, "d1", telemetry) for p in mutants]
        assert any(verdicts)
        assert not all(verdicts)


def test_route_of_a_default_device_topic() -> None:
    r = route_for("devices/d1/telemetry", Topics(), READY, KINDS)
    assert r.fast
    assert r.telemetry
    assert (r.kafka_topic, r.key, r.kind, r.channel, r.tenant, r.device_id) == (
        "iot.telemetry",
        b"d1",
        "telemetry",
        "telemetry",
        "default",
        "d1",
    )
    assert r.topic_header == ("mqtt_topic", b"devices/d1/telemetry")
    assert r.tenant_header is None
    events = route_for("devices/d1/events", Topics(), READY, KINDS)
    assert events.fast
    assert not events.telemetry
    assert events.kafka_topic == "iot.events"


def test_route_of_a_tenant_topic() -> None:
    r = route_for("tenants/t1/devices/d1/telemetry", Topics(), READY, KINDS)
    assert r.fast
    assert r.kafka_topic == "iot.t1.telemetry"
    assert r.tenant == "t1"
    assert r.tenant_header == ("tenant", b"t1")
    not_ready = route_for("tenants/t2/devices/d1/telemetry", Topics(), READY, KINDS)
    assert not not_ready.fast
    assert not_ready.tenant == "t2"


@pytest.mark.parametrize("topic", ["devices/d1/status", "devices/d1/other", "x/y", "devices/d 1/t"])
def test_other_topics_go_the_general_way(topic: str) -> None:
    r = route_for(topic, Topics(), READY, KINDS)
    assert not r.fast
    assert r.channel == topic.rsplit("/", 1)[-1]


class _Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []

    def produce(self, topic: str, value: bytes, key: bytes | None, *args: Any) -> None:
        self.records.append((topic, key, value, args[4]))  # headers: the 8th, by position


NOW_NS = 1_700_000_000_123_456_789
INPUTS = [
    ("devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{"a":1.5}}', 1),
    ("devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{"a":1.5}}', 0),
    ("devices/d1/events", b'{"ts":1,"seq":2,"type":"boot"}', 1),
    ("tenants/t1/devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{}}', 1),
    ("tenants/t2/devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{}}', 1),
    ("devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{},"device_id":"d9"}', 1),
    ("devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{"a":NaN}}', 1),
    ("devices/d1/telemetry", b"nope", 1),
    ("devices/d1/telemetry", b'{"ts":1,"seq":2,"metrics":{},"pad":"' + b"x" * 200 + b'"}', 1),
    ("devices/d1/status", b"online", 1),
    ("devices/bad topic/telemetry", b"{}", 1),
]


def test_pipeline_records_equal_the_general_mappings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)
    cfg = BridgeConfig(max_payload_bytes=200)
    bridge = TelemetryBridge(cfg)
    loop = asyncio.new_event_loop()
    producer = _Recorder()
    bridge._producer = producer
    bridge._loop = loop
    bridge.apply_tenants(frozenset({"t1"}), {})
    for mid, (topic, payload, qos) in enumerate(INPUTS, 1):
        bridge.on_publish(topic, payload, qos, mid, False)
    loop.close()
    topics = Topics()
    now_ms = NOW_NS // 1_000_000
    expected: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []
    for topic, payload, qos in INPUTS:
        rec = map_message(topic, payload, qos, now_ms, topics=topics, max_payload_bytes=200)
        if topic.startswith("tenants/t2/"):  # not ready: the default DLQ, tenant_not_ready
            assert producer.records[len(expected)][0] == "iot.dlq"
            headers = dict(producer.records[len(expected)][3])
            assert headers["error"] == b"tenant_not_ready"
            assert headers["tenant"] == b"t2"
            expected.append(producer.records[len(expected)])
            continue
        expected.append((rec.topic, rec.key, rec.value, rec.headers))
    assert producer.records == expected
    assert [r[0] for r in producer.records] == [
        "iot.telemetry",
        "iot.telemetry",
        "iot.events",
        "iot.t1.telemetry",
        "iot.dlq",
        "iot.dlq",
        "iot.dlq",
        "iot.dlq",
        "iot.dlq",
        "iot.presence",
        "iot.dlq",
    ]
    assert producer.records[0][3] == [
        ("mqtt_topic", b"devices/d1/telemetry"),
        ("received_at", str(now_ms).encode()),
        ("qos", b"1"),
    ]
    assert bridge.stats.received == {"telemetry": 9, "events": 1, "status": 1}
    assert bridge.stats.dlq == {
        "tenant_not_ready": 1,
        "device_mismatch": 1,
        "non_finite": 1,
        "not_json": 1,
        "oversized": 1,
        "bad_topic": 1,
    }
    assert orjson.loads(producer.records[9][2])["online"] is True
