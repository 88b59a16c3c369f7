"""AMQP 1.0 messages as bytes, for what iot-amqp sends out of Kafka (pure).

The northbound stream links and the MR topic links send one message per record: a header, the
record's partition and offset as message annotations, the properties' content-type and
creation-time, string application properties, one Data section. Encoded here byte for byte
as python-qpid-proton's ``Message.encode`` writes them (tests/amqp/test_wire.py compares the
two), at a fraction of its cost: proton builds a ``pn_message`` and four ``Data`` wrappers and
crosses its FFI once per field (docs/benchmarks.md, "AMQP door: where the time goes").
One difference: the creation-time is the record's milliseconds as they are; proton's
``creation_time`` takes seconds and truncates ``ms / 1000 * 1000``, 1 ms short for some values.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_HEADER = b"\x00\x53\x70\x45"  # header, an empty list: not durable
_HEADER_DURABLE = b"\x00\x53\x70\xc0\x02\x01\x41"  # header [durable=true]
_ANNOTATIONS = b"\x00\x53\x72"
_PROPERTIES = b"\x00\x53\x73"
_APP_PROPERTIES = b"\x00\x53\x74"
_DATA = b"\x00\x53\x75"
_NULL = b"\x40"
_LONG = struct.Struct(">Bq")
_U32 = struct.Struct(">I")
_MAP32 = struct.Struct(">BII")
_LIST32 = struct.Struct(">BII")


def _variable(small: int, large: int, raw: bytes) -> bytes:
    if len(raw) <= 0xFF:
        return bytes((small, len(raw))) + raw
    return bytes((large,)) + _U32.pack(len(raw)) + raw


def _symbol(text: str) -> bytes:
    return _variable(0xA3, 0xB3, text.encode("ascii"))


def _string(text: str) -> bytes:
    return _variable(0xA1, 0xB1, text.encode("utf-8"))


def _long(value: int) -> bytes:
    if -128 <= value <= 127:
        return bytes((0x55, value & 0xFF))
    return _LONG.pack(0x81, value)


def _map(entries: list[bytes], count: int) -> bytes:
    body = b"".join(entries)
    return _MAP32.pack(0xD1, len(body) + 4, 2 * count) + body


def _properties(content_type: str | None, creation_ms: int) -> bytes:
    """message-id .. content-encoding null but content-type; then absolute-expiry-time null,
    creation-time."""
    fields = _NULL * 6 + (_NULL if content_type is None else _symbol(content_type))
    fields += _NULL * 2 + _LONG.pack(0x83, creation_ms)  # 0x83: timestamp
    if len(fields) + 1 <= 0xFF:
        return _PROPERTIES + bytes((0xC0, len(fields) + 1, 10)) + fields
    return _PROPERTIES + _LIST32.pack(0xD0, len(fields) + 4, 10) + fields


def encode_message(
    body: bytes,
    *,
    annotations: Mapping[str, int],
    properties: Mapping[str, str],
    creation_ms: int,
    content_type: str | None = None,
    durable: bool = False,
) -> bytes:
    """One message: header, message annotations (symbol -> long), properties, application
    properties (string -> string), one Data section with ``body``."""
    ann = _map([_symbol(k) + _long(v) for k, v in annotations.items()], len(annotations))
    app = _map([_string(k) + _string(v) for k, v in properties.items()], len(properties))
    return b"".join((
        _HEADER_DURABLE if durable else _HEADER,
        _ANNOTATIONS, ann,
        _properties(content_type, creation_ms),
        _APP_PROPERTIES, app,
        _DATA, _variable(0xA0, 0xB0, body),
    ))  # fmt: skip
