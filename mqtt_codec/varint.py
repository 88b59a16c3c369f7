"""MQTT's Variable Byte Integer (MQTT 5.0 1.5.5, the 3.1.1 "remaining length")."""

from __future__ import annotations

from mqtt_codec.errors import MqttProtocolError

VARINT_MAX = 268_435_455  # four bytes of seven bits


def encode_varint(n: int) -> bytes:
    """MQTT Variable Byte Integer."""
    if not 0 <= n <= VARINT_MAX:
        raise ValueError(f"varint out of range: {n}")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(data: bytes | bytearray, pos: int) -> tuple[int, int] | None:
    """(value, next position), or None if ``data`` ends inside the integer."""
    mult = 1
    value = 0
    for i in range(4):
        if pos + i >= len(data):
            return None
        byte = data[pos + i]
        value += (byte & 0x7F) * mult
        if not byte & 0x80:
            return value, pos + i + 1
        mult *= 128
    raise MqttProtocolError("malformed variable byte integer")
