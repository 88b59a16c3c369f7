"""Splitting a byte stream into packets, however it is chunked, and arbitrary bytes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mqtt_codec as codec


@given(
    topic=st.text(min_size=1, max_size=60),
    payload=st.binary(max_size=70000),
    qos=st.integers(0, 1),
    mid=st.integers(1, 65535),
    dup=st.booleans(),
)
def test_publish_roundtrip_and_split(
    topic: str, payload: bytes, qos: int, mid: int, dup: bool
) -> None:
    raw = codec.encode_publish(topic, payload, qos, mid, dup=dup)
    buf = bytearray(raw + raw[:3])  # one complete packet and the start of another
    packets, used = codec.split_packets(buf)
    assert used == len(raw)
    assert len(packets) == 1
    first, body = packets[0]
    p = codec.decode_publish(first, body)
    assert (p.topic, p.payload, p.qos, p.dup) == (topic, payload, qos, dup)
    assert p.packet_id == (mid if qos else 0)


@given(
    st.lists(
        st.tuples(st.binary(max_size=300), st.integers(0, 1), st.integers(1, 65535)),
        min_size=1,
        max_size=20,
    ),
    st.integers(1, 50),
)
def test_reader_splits_any_chunking(msgs: list[tuple[bytes, int, int]], chunk: int) -> None:
    # MQTT 3.1.1 PUBLISHes (no property block), as the load generator sends them
    stream = b"".join(
        codec.encode_publish("devices/d1/telemetry", p, q, i, properties=b"") for p, q, i in msgs
    )
    reader = codec.StreamReader()
    packets = []
    for at in range(0, len(stream), chunk):
        packets += reader.feed(stream[at : at + chunk])
    parsed = [
        codec.parse_publish((p.kind << 4) | p.flags, p.body, codec.MQTT_3_1_1) for p in packets
    ]
    parts = [(pub.topic, pub.packet_id, pub.payload) for pub in parsed]
    assert parts == [("devices/d1/telemetry", i if q else 0, p) for p, q, i in msgs]


def test_split_leaves_an_incomplete_packet() -> None:
    raw = codec.encode_publish("t", b"x" * 200, 1, 9)  # a two-byte remaining length
    for cut in range(len(raw)):
        assert codec.split_packets(bytearray(raw[:cut])) == ([], 0)
    assert codec.split_packets(bytearray(codec.PINGREQ_PACKET)) == ([(0xC0, b"")], 2)


def test_split_rejects_a_five_byte_remaining_length() -> None:
    with pytest.raises(codec.MqttProtocolError):
        codec.split_packets(bytearray(b"\x30\xff\xff\xff\xff\x01"))


@given(st.binary(max_size=300), st.integers(1, 40))
def test_framing_fuzz(data: bytes, chunk: int) -> None:
    """Arbitrary bytes: packets whose lengths add up, or a protocol error, nothing else."""
    try:
        packets, used = codec.split_packets(bytearray(data))
    except codec.MqttProtocolError:
        return
    assert 0 <= used <= len(data)
    assert sum(1 + len(codec.encode_varint(len(b))) + len(b) for _f, b in packets) <= used
    reader = codec.StreamReader()
    got: list[codec.Packet] = []
    with contextlib.suppress(codec.MqttProtocolError):
        for at in range(0, len(data), chunk):
            got += reader.feed(data[at : at + chunk])
        assert [((p.kind << 4) | p.flags, p.body) for p in got] == packets
