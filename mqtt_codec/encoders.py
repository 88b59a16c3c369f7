"""Packets a client sends, as bytes: CONNECT, SUBSCRIBE, PUBLISH, PUBACK (MQTT 5.0 chapter 3).

MQTT 5 throughout, and MQTT 3.1.1 where a user needs it: a level-4 CONNECT, and a PUBLISH
without a property block (``properties=b""``) for the benchmarks' load generator.
"""

from __future__ import annotations

import struct

from mqtt_codec.constants import (
    CONNECT,
    MAXIMUM_PACKET_SIZE,
    MQTT_3_1_1,
    MQTT_5,
    PUBLISH,
    RECEIVE_MAXIMUM,
    SESSION_EXPIRY,
    SUBSCRIBE,
)
from mqtt_codec.properties import utf8
from mqtt_codec.varint import encode_varint


def packet(first_byte: int, body: bytes) -> bytes:
    """A packet: its first byte, the remaining length, the body."""
    return bytes((first_byte,)) + encode_varint(len(body)) + body


def encode_connect(
    client_id: str,
    *,
    keepalive: int,
    clean_start: bool,
    session_expiry: int | None = None,
    receive_maximum: int | None = None,
    maximum_packet_size: int = 0,
    username: str = "",
    password: str = "",
    protocol_level: int = MQTT_5,
) -> bytes:
    """CONNECT, no will. MQTT 5 by default (a property left None is not sent, meaning its
    default); ``protocol_level=4`` is MQTT 3.1.1 (clean session, no properties)."""
    flags = 0
    if clean_start:
        flags |= 0x02
    if username:
        flags |= 0x80
    if password:
        flags |= 0x40
    body = b"\x00\x04MQTT" + struct.pack("!BBH", protocol_level, flags, keepalive)
    if protocol_level == MQTT_5:
        props = b""
        if session_expiry is not None:
            props += struct.pack("!BI", SESSION_EXPIRY, session_expiry)
        if receive_maximum is not None:
            props += struct.pack("!BH", RECEIVE_MAXIMUM, receive_maximum)
        if maximum_packet_size:
            props += struct.pack("!BI", MAXIMUM_PACKET_SIZE, maximum_packet_size)
        body += encode_varint(len(props)) + props
    elif protocol_level != MQTT_3_1_1:
        raise ValueError(f"unsupported protocol level {protocol_level}")
    elif session_expiry is not None or receive_maximum is not None or maximum_packet_size:
        raise ValueError("MQTT 3.1.1 has no CONNECT properties")
    body += utf8(client_id)
    if username:
        body += utf8(username)
    if password:
        raw = password.encode("utf-8")
        body += struct.pack("!H", len(raw)) + raw
    return packet(CONNECT << 4, body)


def encode_subscribe(
    packet_id: int, filters: tuple[str, ...], qos: int = 1, retain_handling: int = 0
) -> bytes:
    """SUBSCRIBE (MQTT 5) with one options byte per filter (maximum QoS, retain handling), no
    properties.

    Retain handling 1 = send retained messages only if the subscription is new (MQTT 5 3.8.3.1).
    """
    body = struct.pack("!H", packet_id) + b"\x00"
    options = bytes((qos | (retain_handling << 4),))
    for topic_filter in filters:
        body += utf8(topic_filter) + options
    return packet((SUBSCRIBE << 4) | 0x02, body)


def encode_puback(packet_id: int, reason: int = 0) -> bytes:
    """PUBACK; reason 0 (Success) in the short form (packet id only, MQTT 5 3.4.2.1), which
    is also the MQTT 3.1.1 PUBACK."""
    if reason:
        return bytes((0x40, 0x03, packet_id >> 8, packet_id & 0xFF, reason))
    return bytes((0x40, 0x02, packet_id >> 8, packet_id & 0xFF))


def encode_pubacks(packet_ids: list[int]) -> bytes:
    """Several PUBACKs in one buffer, in the given order (one socket write)."""
    out = bytearray(4 * len(packet_ids))
    i = 0
    for mid in packet_ids:
        out[i] = 0x40
        out[i + 1] = 0x02
        out[i + 2] = mid >> 8
        out[i + 3] = mid & 0xFF
        i += 4
    return bytes(out)


def encode_publish(
    topic: str,
    payload: bytes,
    qos: int,
    packet_id: int = 0,
    *,
    dup: bool = False,
    properties: bytes = b"\x00",
) -> bytes:
    """PUBLISH; ``properties`` is an encoded property block (:func:`publish_properties`),
    empty by default; ``b""`` (no block at all) makes it an MQTT 3.1.1 PUBLISH."""
    body = utf8(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    body += properties + payload
    return packet((PUBLISH << 4) | (0x08 if dup else 0) | (qos << 1), body)


def publish_head(topic: str, qos: int, payload_len: int) -> bytes:
    """The bytes of an MQTT 3.1.1 PUBLISH before its packet id (QoS 1) or payload (QoS 0),
    for the load generator, which builds many packets to one topic with payloads of one size.

    A QoS 1 packet is ``head + struct.pack("!H", packet_id) + payload``; QoS 0 is
    ``head + payload``. ``payload_len`` must be the exact payload size.
    """
    topic_bytes = utf8(topic)
    variable = len(topic_bytes) + (2 if qos else 0)
    first = 0x30 | (qos << 1)
    return bytes([first]) + encode_varint(variable + payload_len) + topic_bytes


def set_dup(raw: bytes) -> bytes:
    """The same PUBLISH with the DUP flag set (a resend after a reconnect, MQTT 5 4.4)."""
    return bytes((raw[0] | 0x08,)) + raw[1:]
