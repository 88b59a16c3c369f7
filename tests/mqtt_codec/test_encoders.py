"""Encoded packets against the spec's byte layouts (MQTT 5.0 and 3.1.1), and CONNECT round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mqtt_codec as codec


def test_connect_bytes() -> None:
    raw = codec.encode_connect(
        "br",
        keepalive=30,
        clean_start=False,
        session_expiry=86400,
        receive_maximum=1000,
        username="u",
        password="p",
    )
    # fixed header, protocol name, level 5, flags user+password (no clean start), keepalive 30
    assert raw[0] == 0x10
    body = raw[2:]
    assert body[:7] == b"\x00\x04MQTT\x05"
    assert body[7] == 0xC0
    assert body[8:10] == b"\x00\x1e"
    # properties: length 8, session expiry 86400, receive maximum 1000
    assert body[10:19] == b"\x08\x11\x00\x01\x51\x80\x21\x03\xe8"
    assert body[19:] == b"\x00\x02br\x00\x01u\x00\x01p"
    assert raw[1] == len(body)


def test_v5_connect_announces_receive_maximum() -> None:
    packet = codec.encode_connect("x", keepalive=0, clean_start=True, receive_maximum=1000)
    assert packet[0] == 0x10
    # protocol name, level 5, clean start, keepalive 0, props len 3: 0x21 + 1000
    assert packet[2:16] == b"\x00\x04MQTT\x05\x02\x00\x00\x03\x21\x03\xe8"


def test_connect_and_puback_bytes() -> None:
    # MQTT 3.1.1 (protocol level 4): no property block
    assert codec.encode_connect(
        "c", keepalive=60, clean_start=True, protocol_level=codec.MQTT_3_1_1
    ) == (b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01c")
    assert codec.encode_puback(0x1234) == b"\x40\x02\x12\x34"


def test_connect_refuses_what_its_level_cannot_carry() -> None:
    with pytest.raises(ValueError, match="has no CONNECT properties"):
        codec.encode_connect(
            "c", keepalive=0, clean_start=True, receive_maximum=10, protocol_level=4
        )
    with pytest.raises(ValueError, match="protocol level"):
        codec.encode_connect("c", keepalive=0, clean_start=True, protocol_level=3)


@given(
    client_id=st.text(max_size=30),
    keepalive=st.integers(0, 65535),
    clean_start=st.booleans(),
    session_expiry=st.none() | st.integers(0, 2**32 - 1),
    receive_maximum=st.none() | st.integers(1, 65535),
    maximum_packet_size=st.integers(0, 2**32 - 1),
    username=st.text(max_size=20),
    password=st.text(max_size=20),
    v5=st.booleans(),
)
def test_connect_round_trip(
    client_id: str,
    keepalive: int,
    clean_start: bool,
    session_expiry: int | None,
    receive_maximum: int | None,
    maximum_packet_size: int,
    username: str,
    password: str,
    v5: bool,
) -> None:
    props = {
        0x11: session_expiry,
        0x21: receive_maximum,
        0x27: maximum_packet_size or None,
    }
    if not v5:
        session_expiry = receive_maximum = None
        maximum_packet_size = 0
        props = {}
    raw = codec.encode_connect(
        client_id,
        keepalive=keepalive,
        clean_start=clean_start,
        session_expiry=session_expiry,
        receive_maximum=receive_maximum,
        maximum_packet_size=maximum_packet_size,
        username=username,
        password=password,
        protocol_level=codec.MQTT_5 if v5 else codec.MQTT_3_1_1,
    )
    packets, used = codec.split_packets(bytearray(raw))
    assert used == len(raw)
    ((first, body),) = packets
    assert first == codec.CONNECT << 4
    assert codec.decode_connect(body) == codec.Connect(
        client_id,
        codec.MQTT_5 if v5 else codec.MQTT_3_1_1,
        keepalive,
        clean_start,
        {k: v for k, v in props.items() if v is not None},
        username,
        password.encode(),
    )


def test_subscribe_retain_handling_option() -> None:
    raw = codec.encode_subscribe(1, ("a",), qos=1, retain_handling=1)
    assert raw[-1] == 0x11  # QoS 1 | retain handling 1 (bits 4-5)


def test_subscribe_bytes() -> None:
    raw = codec.encode_subscribe(7, ("a/+", "$share/g/b"), qos=1)
    # remaining length 22 = packet id 2 + properties 1 + (2+3+1) + (2+10+1)
    assert raw == b"\x82\x16\x00\x07\x00\x00\x03a/+\x01\x00\x0a$share/g/b\x01"


def test_pubacks_batch() -> None:
    assert codec.encode_puback(0x1234) == b"\x40\x02\x12\x34"
    assert codec.encode_pubacks([1, 65535]) == b"\x40\x02\x00\x01\x40\x02\xff\xff"


def test_puback_forms() -> None:
    assert codec.encode_puback(0x1234) == b"\x40\x02\x12\x34"
    assert codec.encode_puback(7, 0x10) == b"\x40\x03\x00\x07\x10"


def test_qos1_publish_bytes() -> None:
    # MQTT 3.1.1: no property block
    packet = codec.encode_publish("a/b", b"hi", 1, 10, properties=b"")
    # 0x32 = PUBLISH, QoS 1; remaining 2+3 topic + 2 packet id + 2 payload = 9
    assert packet == b"\x32\x09\x00\x03a/b\x00\x0ahi"
    assert codec.encode_publish("a/b", b"hi", 0, properties=b"") == b"\x30\x07\x00\x03a/bhi"


def test_encode_publish_bytes() -> None:
    props = codec.publish_properties(correlation_data=b"xy")
    packet = codec.encode_publish("a/b", b"hi", 1, 10, properties=props)
    # 0x32 PUBLISH QoS 1; topic (2+3) + packet id 2 + props len 1 + props (1+2+2) + payload 2
    assert packet == b"\x32\x0f\x00\x03a/b\x00\x0a\x05\x09\x00\x02xyhi"
    assert codec.encode_publish("a/b", b"hi", 0) == b"\x30\x08\x00\x03a/b\x00hi"


@given(
    topic=st.text(max_size=40),
    payload=st.binary(max_size=20000),
    qos=st.integers(0, 1),
    packet_id=st.integers(1, 65535),
)
def test_publish_head_frames_like_encode_publish(
    topic: str, payload: bytes, qos: int, packet_id: int
) -> None:
    # the load generator's pre-built head + packet id + payload is the whole 3.1.1 PUBLISH
    head = codec.publish_head(topic, qos, len(payload))
    pid = packet_id.to_bytes(2, "big") if qos else b""
    assert head + pid + payload == codec.encode_publish(
        topic, payload, qos, packet_id, properties=b""
    )
