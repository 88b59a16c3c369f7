"""MQTT 5 properties: every type encoded and decoded, hand-encoded blocks, arbitrary bytes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mqtt_codec as codec
from mqtt_codec.constants import BINARY, BYTE, FOUR_BYTES, TWO_BYTES, UTF8, UTF8_PAIR, VARINT


def _s(text: bytes) -> bytes:
    return struct.pack("!H", len(text)) + text


_TEXT = st.text(max_size=30)
_VALUES = {
    BYTE: st.integers(0, 0xFF),
    TWO_BYTES: st.integers(0, 0xFFFF),
    FOUR_BYTES: st.integers(0, 0xFFFF_FFFF),
    VARINT: st.integers(0, 268_435_455),
    UTF8: _TEXT,
    BINARY: st.binary(max_size=40),
    UTF8_PAIR: st.tuples(_TEXT, _TEXT),
}
_PROPERTY = st.sampled_from(sorted(codec.PROPERTY_TYPES)).flatmap(
    lambda ident: st.tuples(st.just(ident), _VALUES[codec.PROPERTY_TYPES[ident]])
)


@given(props=st.lists(_PROPERTY, max_size=12), prefix=st.binary(max_size=4))
def test_every_property_type_round_trips(
    props: list[tuple[int, codec.PropertyValue]], prefix: bytes
) -> None:
    block = codec.encode_properties(props)
    data = prefix + block + b"payload"
    plen, start = codec.decode_varint(data, len(prefix)) or (-1, -1)
    assert list(codec.iter_properties(data, start, start + plen)) == props
    decoded, end = codec.decode_properties(data, len(prefix))
    assert data[end:] == b"payload"
    users = [value for ident, value in props if ident == codec.USER_PROPERTY]
    assert decoded.get(codec.USER_PROPERTY, []) == users
    last = {ident: value for ident, value in props if ident != codec.USER_PROPERTY}
    assert {k: v for k, v in decoded.items() if k != codec.USER_PROPERTY} == last


@pytest.mark.parametrize(
    ("ident", "value"),
    [(0x01, 256), (0x21, -1), (0x02, 2**32), (0x08, b"bytes"), (0x09, "text"), (0x7F, 1)],
)
def test_encode_property_rejects_a_value_of_the_wrong_type(
    ident: int, value: codec.PropertyValue
) -> None:
    with pytest.raises(ValueError, match="property"):
        codec.encode_properties([(ident, value)])


@given(
    correlation=st.binary(min_size=1, max_size=200),
    response=st.none() | st.text(max_size=80),
    expiry=st.none() | st.integers(0, 2**32 - 1),
    users=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=20)), max_size=4),
    mid=st.integers(1, 65535),
)
def test_publish_properties_roundtrip(
    correlation: bytes,
    response: str | None,
    expiry: int | None,
    users: list[tuple[str, str]],
    mid: int,
) -> None:
    props = codec.publish_properties(
        correlation_data=correlation,
        response_topic=response,
        message_expiry=expiry,
        user_properties=tuple(users),
    )
    raw = codec.encode_publish("devices/d/commands/x", b"{}", 1, mid, properties=props)
    packets, used = codec.split_packets(bytearray(raw))
    assert used == len(raw)
    first, body = packets[0]
    pub = codec.decode_publish(first, body)
    assert (pub.payload, pub.packet_id) == (b"{}", mid)
    decoded, end = codec.decode_properties(body, 2 + len("devices/d/commands/x") + 2)
    assert body[end:] == b"{}"
    assert decoded.get(0x09) == correlation
    assert decoded.get(0x08) == response
    assert decoded.get(0x02) == expiry
    assert decoded.get(0x26, []) == users
    dup = codec.set_dup(raw)
    assert codec.decode_publish(dup[0], body).dup
    assert dup[1:] == raw[1:]


def test_publish_properties_sends_empty_correlation_data() -> None:
    # None leaves it out; b"" is a property of length 0
    assert codec.publish_properties() == b"\x00"
    assert codec.publish_properties(correlation_data=b"") == b"\x03\x09\x00\x00"


def test_parse_properties_other_kinds() -> None:
    data = b"\x01\x01" + b"\x23\x00\x07" + b"\x0b\x80\x01" + b"\x03" + _s(b"application/json")
    props = codec.parse_publish_properties(data)
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
    with pytest.raises(codec.MqttProtocolError):
        codec.parse_publish_properties(data)


@pytest.mark.parametrize(
    "block",
    [
        b"\x05\x21\x00",  # length beyond the data
        b"\x02\x7f\x00",  # unknown identifier
        b"\x03\x26\x00\x05",  # user property cut short
        b"\x04\x1f\x00\x01\x80",  # reason string: malformed UTF-8
        b"\x02\x0b\x80",  # subscription identifier running past the block
    ],
)
def test_decode_properties_rejects_bad_blocks(block: bytes) -> None:
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_properties(block + b"\x01", 0)


@given(data=st.binary(max_size=120), pos=st.integers(0, 4))
def test_property_decoders_fuzz(data: bytes, pos: int) -> None:
    """Arbitrary bytes: a result or a protocol error, never another exception."""
    with contextlib.suppress(codec.MqttProtocolError):
        _props, end = codec.decode_properties(data, pos)
        assert pos < end <= len(data)
    with contextlib.suppress(codec.MqttProtocolError):
        codec.parse_publish_properties(data)
    with contextlib.suppress(codec.MqttProtocolError):
        list(codec.iter_properties(data, pos, len(data)))
