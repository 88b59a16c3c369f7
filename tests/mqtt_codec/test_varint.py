"""The Variable Byte Integer against the spec's table, round-trips and arbitrary bytes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mqtt_codec as codec


@pytest.mark.parametrize(
    ("n", "raw"),
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
def test_varint_spec_examples(n: int, raw: bytes) -> None:
    # MQTT 5.0 section 1.5.5 table, the same as MQTT 3.1.1's remaining length (2.2.3, table 2.4)
    assert codec.encode_varint(n) == raw
    assert codec.decode_varint(raw, 0) == (n, len(raw))


def test_remaining_length_out_of_range() -> None:
    # an encoder's argument out of range is the caller's bug: ValueError
    with pytest.raises(ValueError, match="out of range"):
        codec.encode_varint(268_435_456)
    with pytest.raises(ValueError, match="out of range"):
        codec.encode_varint(-1)


def test_varint_incomplete_and_malformed() -> None:
    assert codec.decode_varint(b"\x80", 0) is None
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_varint(b"\xff\xff\xff\xff\x01", 0)


@given(n=st.integers(0, 268_435_455), prefix=st.binary(max_size=5), suffix=st.binary(max_size=5))
def test_varint_round_trip(n: int, prefix: bytes, suffix: bytes) -> None:
    raw = codec.encode_varint(n)
    assert 1 <= len(raw) <= 4
    assert codec.decode_varint(prefix + raw + suffix, len(prefix)) == (
        n,
        len(prefix) + len(raw),
    )
    # every proper prefix of the integer is "incomplete", not an error
    for cut in range(len(raw)):
        assert codec.decode_varint(raw[:cut], 0) is None


@given(data=st.binary(max_size=8), pos=st.integers(0, 9))
def test_decode_varint_fuzz(data: bytes, pos: int) -> None:
    with contextlib.suppress(codec.MqttProtocolError):
        got = codec.decode_varint(data, pos)
        if got is not None:
            value, end = got
            assert pos < end <= min(len(data), pos + 4)
            assert codec.encode_varint(value) == data[pos:end] or data[end - 1] == 0
