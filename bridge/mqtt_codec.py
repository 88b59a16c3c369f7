"""The few MQTT 5 packets the bridge speaks, encoded and decoded (pure).

Why our own codec rather than a client library's: the bridge must send PUBACKs only after
Kafka's delivery report, in arrival order, batched into one socket write per drain. paho-mqtt
writes one PUBACK per ``ack()`` call; gmqtt has no manual-ack API at all (it acks when
``on_message`` returns). The subscriber side needs only CONNECT/CONNACK, SUBSCRIBE/SUBACK,
PUBLISH (QoS 0/1, inbound), PUBACK, PINGREQ/PINGRESP and DISCONNECT, specified in MQTT 5.0
chapter 3. The command path also publishes (QoS 1 with correlation data, response topic,
message expiry and user properties) and reads PUBACK reason codes: paho spent ~0.3 ms of Python
per command on the same packets, here they are a few struct calls.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from bridge.errors import BridgeError

# packet types (high nibble of the first byte)
CONNECT: Final = 1
CONNACK: Final = 2
PUBLISH: Final = 3
PUBACK: Final = 4
SUBSCRIBE: Final = 8
SUBACK: Final = 9
PINGREQ: Final = 12
PINGRESP: Final = 13
DISCONNECT: Final = 14

PINGREQ_PACKET: Final = b"\xc0\x00"
DISCONNECT_NORMAL: Final = b"\xe0\x00"

# property identifiers used here
_PROP_SESSION_EXPIRY: Final = 0x11
_PROP_RECEIVE_MAXIMUM: Final = 0x21
_PROP_MAXIMUM_PACKET_SIZE: Final = 0x27
_PROP_MESSAGE_EXPIRY: Final = 0x02
_PROP_RESPONSE_TOPIC: Final = 0x08
_PROP_CORRELATION_DATA: Final = 0x09
_PROP_USER_PROPERTY: Final = 0x26
# property id -> size of its value where that is fixed (MQTT 5.0 2.2.2.2), for skipping
_FIXED_PROPS: Final = {
    0x01: 1, 0x02: 4, 0x11: 4, 0x13: 2, 0x17: 1, 0x19: 1, 0x21: 2, 0x22: 2, 0x23: 2,
    0x24: 1, 0x25: 1, 0x27: 4, 0x28: 1, 0x29: 1, 0x2A: 1,
}  # fmt: skip
_STRING_PROPS: Final = frozenset({0x03, 0x08, 0x09, 0x12, 0x15, 0x16, 0x18, 0x1A, 0x1C, 0x1F})

CONNACK_REASONS: Final = {
    0x00: "success",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x83: "implementation specific error",
    0x84: "unsupported protocol version",
    0x85: "client identifier not valid",
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
    0x8C: "bad authentication method",
    0x90: "topic name invalid",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x99: "payload format invalid",
    0x9A: "retain not supported",
    0x9B: "QoS not supported",
    0x9C: "use another server",
    0x9D: "server moved",
    0x9F: "connection rate exceeded",
}

DISCONNECT_REASONS: Final = {
    0x00: "normal disconnection",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x87: "not authorized",
    0x89: "server busy",
    0x8B: "server shutting down",
    0x8D: "keep alive timeout",
    0x8E: "session taken over: another client connected with the same client id",
    0x93: "receive maximum exceeded",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x98: "administrative action",
}

# CONNACK reasons after which retrying cannot help (credentials, authorization, protocol)
PERMANENT_CONNACK_REASONS: Final = frozenset({0x84, 0x85, 0x86, 0x87, 0x8A, 0x8C})


class MqttProtocolError(BridgeError):
    """The server sent something this subscriber cannot accept."""


def encode_varint(n: int) -> bytes:
    """MQTT Variable Byte Integer."""
    if not 0 <= n <= 268435455:
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


def _utf8(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("!H", len(raw)) + raw


def _packet(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_varint(len(body)) + body


def encode_connect(
    client_id: str,
    *,
    keepalive: int,
    clean_start: bool,
    session_expiry: int,
    receive_maximum: int,
    maximum_packet_size: int = 0,
    username: str = "",
    password: str = "",
) -> bytes:
    """CONNECT (MQTT 5)."""
    flags = 0
    if clean_start:
        flags |= 0x02
    if username:
        flags |= 0x80
    if password:
        flags |= 0x40
    props = struct.pack("!BI", _PROP_SESSION_EXPIRY, session_expiry)
    props += struct.pack("!BH", _PROP_RECEIVE_MAXIMUM, receive_maximum)
    if maximum_packet_size:
        props += struct.pack("!BI", _PROP_MAXIMUM_PACKET_SIZE, maximum_packet_size)
    body = b"\x00\x04MQTT\x05" + struct.pack("!BH", flags, keepalive)
    body += encode_varint(len(props)) + props
    body += _utf8(client_id)
    if username:
        body += _utf8(username)
    if password:
        raw = password.encode("utf-8")
        body += struct.pack("!H", len(raw)) + raw
    return _packet(CONNECT << 4, body)


def encode_subscribe(
    packet_id: int, filters: tuple[str, ...], qos: int = 1, retain_handling: int = 0
) -> bytes:
    """SUBSCRIBE with one options byte per filter (maximum QoS, retain handling), no properties.

    Retain handling 1 = send retained messages only if the subscription is new (MQTT 5 3.8.3.1).
    """
    body = struct.pack("!H", packet_id) + b"\x00"
    options = bytes((qos | (retain_handling << 4),))
    for topic_filter in filters:
        body += _utf8(topic_filter) + options
    return _packet((SUBSCRIBE << 4) | 0x02, body)


def encode_puback(packet_id: int) -> bytes:
    """PUBACK with reason Success (short form: packet id only)."""
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


@dataclass(frozen=True, slots=True)
class Connack:
    session_present: bool
    reason: int
    receive_maximum: int = 65535  # the server's: QoS 1 publishes it takes unacknowledged

    @property
    def reason_text(self) -> str:
        return CONNACK_REASONS.get(self.reason, f"reason 0x{self.reason:02x}")


def decode_connack(body: bytes) -> Connack:
    if len(body) < 2:
        raise MqttProtocolError("short CONNACK")
    receive_maximum = 65535
    if len(body) > 2:
        value = decode_properties(body, 2)[0].get(_PROP_RECEIVE_MAXIMUM, receive_maximum)
        assert isinstance(value, int)
        receive_maximum = value
    return Connack(bool(body[0] & 0x01), body[1], receive_maximum)


def _skip_property(body: bytes, ident: int, pos: int) -> int:
    """Position after the value of property ``ident`` starting at ``pos``."""
    size = _FIXED_PROPS.get(ident)
    if size is not None:
        return pos + size
    if ident in _STRING_PROPS:
        return pos + 2 + ((body[pos] << 8) | body[pos + 1])
    if ident == _PROP_USER_PROPERTY:
        pos += 2 + ((body[pos] << 8) | body[pos + 1])
        return pos + 2 + ((body[pos] << 8) | body[pos + 1])
    if ident == 0x0B:  # subscription identifier: a varint
        decoded = decode_varint(body, pos)
        if decoded is None:
            raise MqttProtocolError("short property")
        return decoded[1]
    raise MqttProtocolError(f"unknown property 0x{ident:02x}")


def decode_puback(body: bytes) -> tuple[int, int]:
    """(packet id, reason code); a 2-byte PUBACK means Success (MQTT 5 3.4.2.1)."""
    if len(body) < 2:
        raise MqttProtocolError("short PUBACK")
    return (body[0] << 8) | body[1], body[2] if len(body) > 2 else 0


def decode_suback(body: bytes) -> tuple[int, list[int]]:
    """(packet id, reason codes)."""
    if len(body) < 3:
        raise MqttProtocolError("short SUBACK")
    packet_id = (body[0] << 8) | body[1]
    decoded = decode_varint(body, 2)
    if decoded is None:
        raise MqttProtocolError("short SUBACK properties")
    plen, pos = decoded
    return packet_id, list(body[pos + plen :])


def decode_disconnect_reason(body: bytes) -> int:
    return body[0] if body else 0


@dataclass(frozen=True, slots=True)
class Publish:
    """An inbound PUBLISH (tests and tools; the hot path decodes inline)."""

    topic: str
    payload: bytes
    qos: int
    packet_id: int
    dup: bool
    retain: bool


def decode_publish(first_byte: int, body: bytes) -> Publish:
    """Decode a PUBLISH body (after the fixed header)."""
    qos = (first_byte >> 1) & 0x03
    if qos == 3:
        raise MqttProtocolError("PUBLISH with QoS 3")
    tlen = (body[0] << 8) | body[1]
    pos = 2 + tlen
    topic = body[2:pos].decode("utf-8", "replace")
    packet_id = 0
    if qos:
        packet_id = (body[pos] << 8) | body[pos + 1]
        pos += 2
    plen = body[pos]
    if plen < 0x80:
        pos += 1 + plen
    else:
        decoded = decode_varint(body, pos)
        if decoded is None:
            raise MqttProtocolError("short PUBLISH properties")
        plen, pos = decoded
        pos += plen
    return Publish(topic, body[pos:], qos, packet_id, bool(first_byte & 0x08), bool(first_byte & 1))


def encode_publish(
    topic: str,
    payload: bytes,
    qos: int,
    packet_id: int = 0,
    *,
    dup: bool = False,
    properties: bytes = b"\x00",
) -> bytes:
    """PUBLISH; ``properties`` is an encoded property block (:func:`publish_properties`)."""
    body = _utf8(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    body += properties + payload
    return _packet((PUBLISH << 4) | (0x08 if dup else 0) | (qos << 1), body)


def set_dup(packet: bytes) -> bytes:
    """The same PUBLISH with the DUP flag set (a resend after a reconnect, MQTT 5 4.4)."""
    return bytes((packet[0] | 0x08,)) + packet[1:]


def publish_properties(
    *,
    correlation_data: bytes = b"",
    response_topic: str | None = None,
    message_expiry: int | None = None,
    user_properties: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A PUBLISH property block (length included) with the properties the command path sends."""
    props = b""
    if message_expiry is not None:
        props += struct.pack("!BI", _PROP_MESSAGE_EXPIRY, message_expiry)
    if response_topic is not None:
        props += bytes((_PROP_RESPONSE_TOPIC,)) + _utf8(response_topic)
    if correlation_data:
        props += struct.pack("!BH", _PROP_CORRELATION_DATA, len(correlation_data))
        props += correlation_data
    for name, value in user_properties:
        props += bytes((_PROP_USER_PROPERTY,)) + _utf8(name) + _utf8(value)
    return encode_varint(len(props)) + props


def decode_properties(data: bytes, pos: int) -> tuple[dict[int, object], int]:
    """The property block at ``pos`` as {id: value} (user properties: a list of pairs), and
    the position after it. Integers for the fixed-size properties, bytes for correlation data,
    str for the other strings."""
    decoded = decode_varint(data, pos)
    if decoded is None:
        raise MqttProtocolError("short properties")
    plen, pos = decoded
    end = pos + plen
    if end > len(data):
        raise MqttProtocolError("short properties")
    out: dict[int, object] = {}
    try:
        while pos < end:
            ident = data[pos]
            pos += 1
            nxt = _skip_property(data, ident, pos)
            if ident == _PROP_USER_PROPERTY:
                klen = (data[pos] << 8) | data[pos + 1]
                key = data[pos + 2 : pos + 2 + klen].decode()
                value = data[pos + 4 + klen : nxt].decode()
                pairs = out.setdefault(ident, [])
                assert isinstance(pairs, list)
                pairs.append((key, value))
            elif ident in _STRING_PROPS:
                raw = bytes(data[pos + 2 : nxt])
                out[ident] = raw if ident == _PROP_CORRELATION_DATA else raw.decode()
            elif ident in _FIXED_PROPS:
                out[ident] = int.from_bytes(data[pos:nxt], "big")
            else:
                out[ident] = decode_varint(data, pos)[0]  # type: ignore[index]
            pos = nxt
    except UnicodeDecodeError as exc:  # MQTT 5 1.5.4: a malformed string is a malformed packet
        raise MqttProtocolError(f"malformed UTF-8 in property: {exc}") from exc
    return out, end


def split_packets(buf: bytearray) -> tuple[list[tuple[int, bytes]], int]:
    """Cut complete packets off the front of ``buf``: ([(first byte, body)], bytes consumed)."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    size = len(buf)
    while size - pos >= 2:
        first = buf[pos]
        length = buf[pos + 1]
        start = pos + 2
        if length & 0x80:
            decoded = decode_varint(buf, pos + 1)
            if decoded is None:
                break
            length, start = decoded
        end = start + length
        if end > size:
            break
        out.append((first, bytes(buf[start:end])))
        pos = end
    return out, pos
