"""The responder's MQTT 5 helpers against hand-encoded packets (MQTT 5 sections 2.2.2, 3.3, 3.4)."""

from __future__ import annotations

import contextlib
import struct

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import mqtt5_wire, mqtt_wire
from bench.mqtt_wire import Packet, WireError


def _s(text: bytes) -> bytes:
    return struct.pack("!H", len(text)) + text


def _command_packet(
    topic: bytes, packet_id: int, props: bytes, payload: bytes, qos: int = 1
) -> Packet:
    body = _s(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    body += mqtt_wire.encode_remaining_length(len(props)) + props + payload
    return Packet(mqtt_wire.PUBLISH, qos << 1, body)


# the properties the command service sends: response topic, correlation data, expiry, user props
SERVICE_PROPS = (
    b"\x08" + _s(b"devices/d1/replies/c-42")
    + b"\x09" + _s(b"c-42")
    + b"\x02" + struct.pack("!I", 30)
    + b"\x26" + _s(b"command_id") + _s(b"c-42")
    + b"\x26" + _s(b"attempt") + _s(b"1")
)  # fmt: skip


def test_parse_publish_reads_every_property() -> None:
    packet = _command_packet(b"devices/d1/commands/reboot", 513, SERVICE_PROPS, b'{"a":1}')
    pub = mqtt5_wire.parse_publish(packet)
    assert pub.topic == "devices/d1/commands/reboot"
    assert (pub.qos, pub.packet_id, pub.payload) == (1, 513, b'{"a":1}')
    assert pub.first(mqtt5_wire.RESPONSE_TOPIC) == "devices/d1/replies/c-42"
    assert pub.first(mqtt5_wire.CORRELATION_DATA) == b"c-42"
    assert pub.first(mqtt5_wire.MESSAGE_EXPIRY) == 30
    assert pub.properties[mqtt5_wire.USER_PROPERTY] == [("command_id", "c-42"), ("attempt", "1")]


def test_parse_properties_other_kinds() -> None:
    data = b"\x01\x01" + b"\x23\x00\x07" + b"\x0b\x80\x01" + b"\x03" + _s(b"application/json")
    props = mqtt5_wire.parse_properties(data)
    assert props == {0x01: [1], 0x23: [7], 0x0B: [128], 0x03: ["application/json"]}


@pytest.mark.parametrize(
    "data",
    [
        b"\x11\x00\x00\x00\x00",  # session expiry: not a PUBLISH property
        b"\x08\x00\x05ab",  # truncated string
        b"\x02\x00\x00",  # truncated u32
        b"\x0b\x80\x80\x80\x80\x01",  # 5-byte varint
    ],
)
def test_parse_properties_rejects_bad_input(data: bytes) -> None:
    with pytest.raises(WireError):
        mqtt5_wire.parse_properties(data)


def test_encode_publish_bytes() -> None:
    packet = mqtt5_wire.encode_publish("a/b", b"hi", qos=1, packet_id=10, correlation_data=b"xy")
    # 0x32 PUBLISH QoS 1; topic (2+3) + packet id 2 + props len 1 + props (1+2+2) + payload 2
    assert packet == b"\x32\x0f\x00\x03a/b\x00\x0a\x05\x09\x00\x02xyhi"
    assert mqtt5_wire.encode_publish("a/b", b"hi", qos=0) == b"\x30\x08\x00\x03a/b\x00hi"


def test_puback_forms_and_parts() -> None:
    assert mqtt5_wire.puback(0x1234) == b"\x40\x02\x12\x34"
    assert mqtt5_wire.puback(7, 0x10) == b"\x40\x03\x00\x07\x10"
    reader = mqtt_wire.StreamReader()
    short, long_ = reader.feed(b"\x40\x02\x12\x34" + b"\x40\x04\x00\x07\x10\x00")
    assert mqtt5_wire.puback_parts(short) == (0x1234, 0)
    assert mqtt5_wire.puback_parts(long_) == (7, 0x10)


def test_suback_and_connack() -> None:
    suback = Packet(mqtt_wire.SUBACK, 0, b"\x00\x01\x00\x01")
    assert mqtt5_wire.suback_reasons(suback) == (1, [1])
    refused = Packet(mqtt_wire.SUBACK, 0, b"\x00\x02\x03\x1f\x00\x00\x87")
    assert mqtt5_wire.suback_reasons(refused) == (2, [0x87])
    assert mqtt5_wire.connack_reason(Packet(mqtt_wire.CONNACK, 0, b"\x00\x00\x00")) == 0
    assert mqtt5_wire.connack_reason(Packet(mqtt_wire.CONNACK, 0, b"\x00\x87\x00")) == 0x87


def _split(data: bytes) -> list[Packet]:
    return mqtt_wire.StreamReader().feed(data)


def test_answer_writes_puback_then_reply_to_the_response_topic() -> None:
    packet = _command_packet(b"devices/d1/commands/reboot", 513, SERVICE_PROPS, b"{}")
    ans = mqtt5_wire.answer("d1", mqtt5_wire.parse_publish(packet), 9)
    assert (ans.command_id, ans.replied) == ("c-42", True)
    ack, reply = _split(ans.data)
    assert mqtt5_wire.puback_parts(ack) == (513, 0)
    pub = mqtt5_wire.parse_publish(reply)
    assert (pub.topic, pub.qos, pub.packet_id) == ("devices/d1/replies/c-42", 1, 9)
    assert pub.first(mqtt5_wire.CORRELATION_DATA) == b"c-42"
    assert orjson.loads(pub.payload) == {
        "command_id": "c-42",
        "status": "ok",
        "result": {"device_id": "d1", "command": "reboot"},
    }


def test_answer_without_properties_uses_the_json_command_id() -> None:
    # an MQTT 3.1.1-style command: no properties, command_id in the JSON
    packet = _command_packet(b"devices/d7/commands/set", 1, b"", b'{"command_id":"x1","v":3}')
    ack, reply = _split(mqtt5_wire.answer("d7", mqtt5_wire.parse_publish(packet), 65535).data)
    assert mqtt5_wire.puback_parts(ack) == (1, 0)
    pub = mqtt5_wire.parse_publish(reply)
    assert (pub.topic, pub.packet_id) == ("devices/d7/replies/x1", 65535)
    assert pub.properties == {}
    assert orjson.loads(pub.payload)["command_id"] == "x1"


def test_answer_qos0_command_has_no_puback() -> None:
    packet = _command_packet(b"devices/d7/commands/set", 0, b"", b'{"command_id":"x2"}', qos=0)
    (reply,) = _split(mqtt5_wire.answer("d7", mqtt5_wire.parse_publish(packet), 3).data)
    assert mqtt5_wire.parse_publish(reply).topic == "devices/d7/replies/x2"


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1,2]", b'{"command_id": 5}'])
def test_answer_without_any_command_id_only_acks(payload: bytes) -> None:
    packet = _command_packet(b"devices/d7/commands/set", 4, b"", payload)
    ans = mqtt5_wire.answer("d7", mqtt5_wire.parse_publish(packet), 1)
    assert (ans.replied, ans.command_id, ans.data) == (False, None, b"\x40\x02\x00\x04")


@given(
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
    payload=st.binary(max_size=2000),
    packet_id=st.integers(1, 65535),
    corr=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_encode_parse_round_trip(
    topic: str, payload: bytes, packet_id: int, corr: bytes | None
) -> None:
    data = mqtt5_wire.encode_publish(topic, payload, packet_id=packet_id, correlation_data=corr)
    (packet,) = _split(data)
    pub = mqtt5_wire.parse_publish(packet)
    assert (pub.topic, pub.packet_id, pub.payload) == (topic, packet_id, payload)
    assert pub.first(mqtt5_wire.CORRELATION_DATA) == corr


@given(st.binary(max_size=200))
def test_parse_publish_never_crashes_otherwise(body: bytes) -> None:
    with contextlib.suppress(WireError):
        mqtt5_wire.parse_publish(Packet(mqtt_wire.PUBLISH, 0x02, body))
