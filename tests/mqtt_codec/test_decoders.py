"""Decoders against hand-encoded packets (MQTT 5 sections 2.2.2, 3.2, 3.3, 3.4, 3.9), round-trips
and arbitrary bytes."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mqtt_codec as codec
from tests.mqtt_codec.command_packets import SERVICE_PROPS, command_body


def test_connack_suback_decode() -> None:
    assert codec.decode_connack(b"\x01\x00\x00") == codec.Connack(True, 0)
    assert codec.decode_connack(b"\x00\x86\x00").reason_text == "bad user name or password"
    assert codec.decode_suback(b"\x00\x01\x00\x01\x80") == (1, [1, 0x80])


def test_connack_receive_maximum() -> None:
    # session expiry (4 bytes), receive maximum 20, assigned client id (a string): all skipped
    # or read, whatever their order
    props = b"\x11\x00\x00\x00\x3c" + b"\x21\x00\x14" + b"\x12\x00\x02id"
    body = b"\x00\x00" + codec.encode_varint(len(props)) + props
    assert codec.decode_connack(body) == codec.Connack(False, 0, 20)
    assert codec.decode_connack(b"\x00\x00\x00").receive_maximum == 65535
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_connack(b"\x00\x00\x05\x21\x00")


def test_connack_with_a_malformed_string_property_is_a_protocol_error() -> None:
    # reason string (0x1F) holding invalid UTF-8
    props = b"\x1f\x00\x01\x80"
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_connack(b"\x00\x00" + codec.encode_varint(len(props)) + props)


def test_puback_reason() -> None:
    assert codec.decode_puback(b"\x00\x07") == (7, 0)
    assert codec.decode_puback(b"\x01\x00\x10\x00") == (256, 0x10)  # no matching subscribers
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_puback(b"\x01")


def test_puback_forms_and_parts() -> None:
    reader = codec.StreamReader()
    short, long_ = reader.feed(b"\x40\x02\x12\x34" + b"\x40\x04\x00\x07\x10\x00")
    assert codec.decode_puback(short.body) == (0x1234, 0)
    assert codec.decode_puback(long_.body) == (7, 0x10)


def test_suback_and_connack() -> None:
    assert codec.decode_suback(b"\x00\x01\x00\x01") == (1, [1])
    assert codec.decode_suback(b"\x00\x02\x03\x1f\x00\x00\x87") == (2, [0x87])
    assert codec.decode_connack(b"\x00\x00\x00").reason == 0
    assert codec.decode_connack(b"\x00\x87\x00").reason == 0x87
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_suback(b"\x00\x02\x05\x1f\x00")  # properties longer than the packet


def test_parse_publish_reads_every_property() -> None:
    body = command_body(b"devices/d1/commands/reboot", 513, SERVICE_PROPS, b'{"a":1}')
    pub = codec.parse_publish(0x32, body)
    assert pub.topic == "devices/d1/commands/reboot"
    assert (pub.qos, pub.packet_id, pub.payload) == (1, 513, b'{"a":1}')
    assert pub.first(codec.RESPONSE_TOPIC) == "devices/d1/replies/c-42"
    assert pub.first(codec.CORRELATION_DATA) == b"c-42"
    assert pub.first(codec.MESSAGE_EXPIRY) == 30
    assert pub.properties[codec.USER_PROPERTY] == [("command_id", "c-42"), ("attempt", "1")]
    # the fast decoder skips the same properties
    fast = codec.decode_publish(0x32, body)
    assert (fast.topic, fast.packet_id, fast.payload) == (pub.topic, 513, b'{"a":1}')


def test_v5_publish_parts_skips_properties() -> None:
    # topic "t", packet id 7, properties: payload format indicator (0x01, 1 byte) = 1
    body = b"\x00\x01t" + struct.pack("!H", 7) + b"\x02\x01\x01" + b"payload"
    pub = codec.parse_publish(0x32, body)
    assert (pub.topic, pub.packet_id, pub.payload) == ("t", 7, b"payload")
    assert (pub.topic, pub.packet_id, pub.payload) == (
        codec.decode_publish(0x32, body).topic,
        7,
        codec.decode_publish(0x32, body).payload,
    )


@given(
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
    payload=st.binary(max_size=2000),
    packet_id=st.integers(1, 65535),
    corr=st.one_of(st.none(), st.binary(max_size=200)),
    qos=st.integers(0, 1),
    dup=st.booleans(),
)
def test_encode_parse_round_trip(
    topic: str, payload: bytes, packet_id: int, corr: bytes | None, qos: int, dup: bool
) -> None:
    props = codec.publish_properties(correlation_data=corr)
    data = codec.encode_publish(topic, payload, qos, packet_id, dup=dup, properties=props)
    (packet,) = codec.StreamReader().feed(data)
    pub = codec.parse_publish((packet.kind << 4) | packet.flags, packet.body)
    assert (pub.topic, pub.packet_id, pub.payload) == (topic, packet_id if qos else 0, payload)
    assert (pub.qos, pub.dup, pub.retain) == (qos, dup, False)
    assert pub.first(codec.CORRELATION_DATA) == corr


@pytest.mark.parametrize(
    ("body", "fast_checks_it"),
    [
        (b"", True),  # nothing
        (b"\x00\x05ab", True),  # topic longer than the packet
        (b"\x00\x01t\x00", True),  # QoS 1 without its packet id
        # properties longer than the packet: the fast decoder does not look (empty payload)
        (b"\x00\x01t\x00\x01\x09\x01", False),
    ],
)
def test_publish_decoders_reject_short_packets(body: bytes, fast_checks_it: bool) -> None:
    with pytest.raises(codec.MqttProtocolError):
        codec.parse_publish(0x32, body)
    if fast_checks_it:
        with pytest.raises(codec.MqttProtocolError):
            codec.decode_publish(0x32, body)
    else:
        assert codec.decode_publish(0x32, body).payload == b""


def test_publish_with_qos_3_is_a_protocol_error() -> None:
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_publish(0x36, b"\x00\x01t\x00\x01\x00")
    with pytest.raises(codec.MqttProtocolError):
        codec.parse_publish(0x36, b"\x00\x01t\x00\x01\x00")


def test_parse_publish_rejects_a_topic_that_is_not_utf8() -> None:
    with pytest.raises(codec.MqttProtocolError):
        codec.parse_publish(0x30, b"\x00\x01\xff\x00")


@given(st.binary(max_size=200))
def test_parse_publish_never_crashes_otherwise(body: bytes) -> None:
    with contextlib.suppress(codec.MqttProtocolError):
        codec.parse_publish(0x32, body)


_DECODERS: list[Callable[[int, bytes], object]] = [
    codec.decode_publish,
    codec.parse_publish,
    lambda first, body: codec.parse_publish(first, body, codec.MQTT_3_1_1),
    lambda _first, body: codec.decode_connack(body),
    lambda _first, body: codec.decode_connect(body),
    lambda _first, body: codec.decode_puback(body),
    lambda _first, body: codec.decode_suback(body),
    lambda _first, body: codec.decode_disconnect_reason(body),
]


@given(first=st.integers(0, 255), body=st.binary(max_size=200))
def test_every_decoder_fails_only_with_a_protocol_error(first: int, body: bytes) -> None:
    """Fuzz: arbitrary bytes give a result or MqttProtocolError, never another exception."""
    for decode in _DECODERS:
        with contextlib.suppress(codec.MqttProtocolError):
            decode(first, body)


@given(
    first=st.integers(0, 255),
    body=st.binary(max_size=60),
    prefix=st.sampled_from([b"\x00\x04MQTT\x05", b"\x00\x04MQTT\x04", b"\x00\x01t\x00\x01"]),
)
def test_decoders_fuzz_near_valid_packets(first: int, body: bytes, prefix: bytes) -> None:
    # arbitrary bytes after a valid start reach deeper into the decoders
    for decode in _DECODERS:
        with contextlib.suppress(codec.MqttProtocolError):
            decode(first, prefix + body)
