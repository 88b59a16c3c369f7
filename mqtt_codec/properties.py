"""MQTT 5 properties (MQTT 5.0 2.2.2): every property type encoded and decoded.

A property block is a Variable Byte Integer length followed by (identifier, value) pairs; the
identifier fixes the value's type (:data:`mqtt_codec.constants.PROPERTY_TYPES`). Values are
``int`` for the integer types, ``str`` for UTF-8 strings, ``bytes`` for binary data and
``(str, str)`` for user properties.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from mqtt_codec.constants import (
    BINARY,
    CORRELATION_DATA,
    FIXED_SIZE,
    MESSAGE_EXPIRY,
    PROPERTY_TYPES,
    PUBLISH_PROPERTIES,
    RESPONSE_TOPIC,
    USER_PROPERTY,
    UTF8,
    UTF8_PAIR,
    VARINT,
)
from mqtt_codec.errors import MqttProtocolError
from mqtt_codec.varint import decode_varint, encode_varint

PropertyValue = int | str | bytes | tuple[str, str]


def utf8(text: str) -> bytes:
    """A UTF-8 Encoded String: two-byte length, then the bytes (MQTT 5.0 1.5.4)."""
    raw = text.encode("utf-8")
    return struct.pack("!H", len(raw)) + raw


def binary(raw: bytes) -> bytes:
    """Binary Data: two-byte length, then the bytes (MQTT 5.0 1.5.6)."""
    return struct.pack("!H", len(raw)) + raw


# -- encoding ---------------------------------------------------------------------------


def encode_property(ident: int, value: PropertyValue) -> bytes:
    """One property (identifier and value), checked against the identifier's type."""
    kind = PROPERTY_TYPES.get(ident)
    size = FIXED_SIZE.get(kind or "")
    if size is not None and isinstance(value, int):
        if not 0 <= value < 1 << (8 * size):
            raise ValueError(f"property 0x{ident:02x} out of range: {value}")
        return bytes((ident,)) + value.to_bytes(size, "big")
    if kind == VARINT and isinstance(value, int):
        return bytes((ident,)) + encode_varint(value)
    if kind == UTF8 and isinstance(value, str):
        return bytes((ident,)) + utf8(value)
    if kind == BINARY and isinstance(value, bytes):
        return bytes((ident,)) + binary(value)
    if kind == UTF8_PAIR and isinstance(value, tuple):
        return bytes((ident,)) + utf8(value[0]) + utf8(value[1])
    raise ValueError(f"property 0x{ident:02x} cannot hold {value!r}")


def encode_properties(properties: Iterable[tuple[int, PropertyValue]]) -> bytes:
    """A property block, its length included, with the properties in the given order."""
    props = b"".join(encode_property(ident, value) for ident, value in properties)
    return encode_varint(len(props)) + props


def publish_properties(
    *,
    correlation_data: bytes | None = None,
    response_topic: str | None = None,
    message_expiry: int | None = None,
    user_properties: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A PUBLISH property block (length included) with the properties the command path sends.

    Built with a few struct calls rather than :func:`encode_properties`: it runs per command.
    """
    props = b""
    if message_expiry is not None:
        props += struct.pack("!BI", MESSAGE_EXPIRY, message_expiry)
    if response_topic is not None:
        props += bytes((RESPONSE_TOPIC,)) + utf8(response_topic)
    if correlation_data is not None:
        props += struct.pack("!BH", CORRELATION_DATA, len(correlation_data))
        props += correlation_data
    for name, value in user_properties:
        props += bytes((USER_PROPERTY,)) + utf8(name) + utf8(value)
    return encode_varint(len(props)) + props


# -- decoding ---------------------------------------------------------------------------


def read_binary(data: bytes, pos: int, end: int) -> tuple[bytes, int]:
    """The length-prefixed bytes at ``pos`` (not past ``end``), and the position after them."""
    if pos + 2 > end:
        raise MqttProtocolError("short property")
    nxt = pos + 2 + ((data[pos] << 8) | data[pos + 1])
    if nxt > end:
        raise MqttProtocolError("short property")
    return bytes(data[pos + 2 : nxt]), nxt


def decode_text(raw: bytes) -> str:
    """``raw`` as UTF-8; malformed UTF-8 is a protocol error."""
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:  # MQTT 5 1.5.4: a malformed string is a malformed packet
        raise MqttProtocolError(f"malformed UTF-8: {exc}") from exc


def iter_properties(data: bytes, pos: int, end: int) -> Iterator[tuple[int, PropertyValue]]:
    """The (identifier, value) pairs of the properties in ``data[pos:end]``, in order."""
    if end > len(data):
        raise MqttProtocolError("short properties")
    while pos < end:
        ident = data[pos]
        pos += 1
        kind = PROPERTY_TYPES.get(ident)
        value: PropertyValue
        size = FIXED_SIZE.get(kind or "")
        if size is not None:
            if pos + size > end:
                raise MqttProtocolError("short property")
            value = int.from_bytes(data[pos : pos + size], "big")
            pos += size
        elif kind == VARINT:
            decoded = decode_varint(data, pos)
            if decoded is None or decoded[1] > end:
                raise MqttProtocolError("short property")
            value, pos = decoded
        elif kind == UTF8:
            raw, pos = read_binary(data, pos, end)
            value = decode_text(raw)
        elif kind == BINARY:
            value, pos = read_binary(data, pos, end)
        elif kind == UTF8_PAIR:
            key, pos = read_binary(data, pos, end)
            raw, pos = read_binary(data, pos, end)
            value = (decode_text(key), decode_text(raw))
        else:
            raise MqttProtocolError(f"unknown property 0x{ident:02x}")
        yield ident, value


def decode_properties(data: bytes, pos: int) -> tuple[dict[int, object], int]:
    """The property block at ``pos`` (its length first) as {id: value} (user properties: a
    list of pairs, other repeated properties: the last), and the position after it."""
    decoded = decode_varint(data, pos)
    if decoded is None:
        raise MqttProtocolError("short properties")
    plen, pos = decoded
    end = pos + plen
    out: dict[int, object] = {}
    for ident, value in iter_properties(data, pos, end):
        if ident == USER_PROPERTY:
            pairs = out.setdefault(ident, [])
            assert isinstance(pairs, list)
            pairs.append(value)
        else:
            out[ident] = value
    return out, end


def parse_publish_properties(data: bytes) -> dict[int, list[PropertyValue]]:
    """A PUBLISH's properties (the bytes after the property length), every value of each
    identifier in order; a property a PUBLISH may not carry is a protocol error."""
    out: dict[int, list[PropertyValue]] = {}
    for ident, value in iter_properties(data, 0, len(data)):
        if ident not in PUBLISH_PROPERTIES:
            raise MqttProtocolError(f"property 0x{ident:02x} is not allowed in a PUBLISH")
        out.setdefault(ident, []).append(value)
    return out
