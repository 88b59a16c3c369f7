"""Hand-encoded command PUBLISHes (MQTT 5 2.2.2, 3.3), shared by the codec's and the responder's
tests: built byte by byte here, not by the encoder under test."""

from __future__ import annotations

import struct

import mqtt_codec as codec


def string_field(text: bytes) -> bytes:
    """A two-byte length, then the bytes (MQTT 5 1.5.4, 1.5.6)."""
    return struct.pack("!H", len(text)) + text


# the properties the command service sends: response topic, correlation data, expiry, user props
SERVICE_PROPS = (
    b"\x08" + string_field(b"devices/d1/replies/c-42")
    + b"\x09" + string_field(b"c-42")
    + b"\x02" + struct.pack("!I", 30)
    + b"\x26" + string_field(b"command_id") + string_field(b"c-42")
    + b"\x26" + string_field(b"attempt") + string_field(b"1")
)  # fmt: skip


def command_body(topic: bytes, packet_id: int, props: bytes, payload: bytes, qos: int = 1) -> bytes:
    """A PUBLISH body: topic, packet id (QoS 1), property block, payload."""
    body = string_field(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    return body + codec.encode_varint(len(props)) + props + payload
