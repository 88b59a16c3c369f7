"""The load generator's MQTT wire format against the spec's encodings."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import mqtt_wire


@pytest.mark.parametrize(
    ("n", "encoded"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_151, b"\xff\xff\x7f"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_remaining_length_spec_examples(n: int, encoded: bytes) -> None:
    # MQTT 3.1.1 section 2.2.3, table 2.4
    assert mqtt_wire.encode_remaining_length(n) == encoded


def test_remaining_length_out_of_range() -> None:
    with pytest.raises(mqtt_wire.WireError):
        mqtt_wire.encode_remaining_length(268_435_456)


def test_qos1_publish_bytes() -> None:
    packet = mqtt_wire.publish("a/b", b"hi", qos=1, packet_id=10)
    # 0x32 = PUBLISH, QoS 1; remaining 2+3 topic + 2 packet id + 2 payload = 9
    assert packet == b"\x32\x09\x00\x03a/b\x00\x0ahi"
    assert mqtt_wire.publish("a/b", b"hi") == b"\x30\x07\x00\x03a/bhi"


def test_connect_and_puback_bytes() -> None:
    assert mqtt_wire.connect("c", keepalive=60) == (
        b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01c"
    )
    assert mqtt_wire.puback(0x1234) == b"\x40\x02\x12\x34"


@given(
    st.lists(
        st.tuples(st.binary(max_size=300), st.integers(0, 1), st.integers(1, 65535)),
        min_size=1,
        max_size=20,
    ),
    st.integers(1, 50),
)
def test_reader_splits_any_chunking(msgs: list[tuple[bytes, int, int]], chunk: int) -> None:
    stream = b"".join(mqtt_wire.publish("devices/d1/telemetry", p, q, i) for p, q, i in msgs)
    reader = mqtt_wire.StreamReader()
    packets = []
    for at in range(0, len(stream), chunk):
        packets += reader.feed(stream[at : at + chunk])
    parts = [mqtt_wire.publish_parts(p) for p in packets]
    assert parts == [("devices/d1/telemetry", i if q else 0, p) for p, q, i in msgs]


def test_v5_publish_parts_skips_properties() -> None:
    # topic "t", packet id 7, properties: payload format indicator (0x01, 1 byte) = 1
    body = b"\x00\x01t" + struct.pack("!H", 7) + b"\x02\x01\x01" + b"payload"
    packet = mqtt_wire.Packet(mqtt_wire.PUBLISH, 0x02, body)
    assert mqtt_wire.publish_parts_v5(packet) == ("t", 7, b"payload")


def test_v5_connect_announces_receive_maximum() -> None:
    packet = mqtt_wire.connect_v5("x", receive_maximum=1000)
    assert packet[0] == 0x10
    # protocol name, level 5, clean start, keepalive 0, props len 3: 0x21 + 1000
    assert packet[2:16] == b"\x00\x04MQTT\x05\x02\x00\x00\x03\x21\x03\xe8"
