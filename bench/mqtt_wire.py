"""Just enough MQTT 3.1.1 wire format for a load generator and a counting subscriber.

The load must be cheaper than anything it measures, so the publisher and the "limit" subscriber
speak the protocol on raw sockets: packets are built with byte concatenation and parsed by a
small incremental reader. Pure: no sockets here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CONNACK = 2
PUBLISH = 3
PUBACK = 4
SUBACK = 9
PINGRESP = 13


class WireError(Exception):
    """A malformed or unexpected MQTT packet."""


def encode_remaining_length(n: int) -> bytes:
    """MQTT's variable-length integer (1-4 bytes, 7 bits each, high bit = more follows)."""
    if not 0 <= n <= 268_435_455:
        raise WireError(f"remaining length out of range: {n}")
    out = bytearray()
    while True:
        byte = n % 128
        n //= 128
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _utf8(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def connect(client_id: str, keepalive: int = 60, clean_session: bool = True) -> bytes:
    """A CONNECT packet, protocol level 4 (MQTT 3.1.1), no will, no credentials."""
    flags = 0x02 if clean_session else 0x00
    body = _utf8("MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + _utf8(client_id)
    return bytes([0x10]) + encode_remaining_length(len(body)) + body


def subscribe(packet_id: int, topic_filter: str, qos: int) -> bytes:
    body = struct.pack("!H", packet_id) + _utf8(topic_filter) + bytes([qos])
    return bytes([0x82]) + encode_remaining_length(len(body)) + body


def publish_head(topic: str, qos: int, payload_len: int) -> bytes:
    """The bytes of a PUBLISH before its packet id (QoS 1) or payload (QoS 0).

    A QoS 1 packet is ``head + struct.pack("!H", packet_id) + payload``; QoS 0 is
    ``head + payload``. ``payload_len`` must be the exact payload size.
    """
    topic_bytes = _utf8(topic)
    variable = len(topic_bytes) + (2 if qos else 0)
    first = 0x30 | (qos << 1)
    return bytes([first]) + encode_remaining_length(variable + payload_len) + topic_bytes


def publish(topic: str, payload: bytes, qos: int = 0, packet_id: int = 0) -> bytes:
    head = publish_head(topic, qos, len(payload))
    if qos:
        return head + struct.pack("!H", packet_id) + payload
    return head + payload


def puback(packet_id: int) -> bytes:
    return b"\x40\x02" + struct.pack("!H", packet_id)


DISCONNECT = b"\xe0\x00"
PINGREQ = b"\xc0\x00"


@dataclass(frozen=True, slots=True)
class Packet:
    kind: int
    flags: int
    body: bytes


class StreamReader:
    """Splits a byte stream into MQTT packets; feed() returns the complete ones."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Packet]:
        self._buf += data
        out: list[Packet] = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while pos + 2 <= n:
            first = buf[pos]
            length = 0
            mult = 1
            i = pos + 1
            complete = False
            while i < n:
                byte = buf[i]
                i += 1
                length += (byte & 0x7F) * mult
                if not byte & 0x80:
                    complete = True
                    break
                mult *= 128
                if mult > 128**3:
                    raise WireError("remaining length longer than 4 bytes")
            if not complete or i + length > n:
                break
            out.append(Packet(first >> 4, first & 0x0F, bytes(buf[i : i + length])))
            pos = i + length
        del buf[:pos]
        return out


def publish_parts(packet: Packet) -> tuple[str, int, bytes]:
    """(topic, packet id or 0, payload) of a PUBLISH packet."""
    if packet.kind != PUBLISH:
        raise WireError(f"not a PUBLISH: type {packet.kind}")
    body = packet.body
    (tlen,) = struct.unpack_from("!H", body, 0)
    topic = body[2 : 2 + tlen].decode()
    pos = 2 + tlen
    qos = (packet.flags >> 1) & 0x03
    packet_id = 0
    if qos:
        (packet_id,) = struct.unpack_from("!H", body, pos)
        pos += 2
    return topic, packet_id, body[pos:]


def connect_v5(client_id: str, receive_maximum: int = 65535, keepalive: int = 0) -> bytes:
    """An MQTT 5 CONNECT (clean start, session expiry 0) announcing a Receive Maximum."""
    props = b"\x21" + struct.pack("!H", receive_maximum)
    body = (
        _utf8("MQTT")
        + bytes([5, 0x02])
        + struct.pack("!H", keepalive)
        + encode_remaining_length(len(props))
        + props
        + _utf8(client_id)
    )
    return bytes([0x10]) + encode_remaining_length(len(body)) + body


def subscribe_v5(packet_id: int, topic_filter: str, qos: int) -> bytes:
    body = struct.pack("!H", packet_id) + b"\x00" + _utf8(topic_filter) + bytes([qos])
    return bytes([0x82]) + encode_remaining_length(len(body)) + body


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    mult = 1
    while True:
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) * mult
        if not byte & 0x80:
            return value, pos
        mult *= 128


def publish_parts_v5(packet: Packet) -> tuple[str, int, bytes]:
    """(topic, packet id or 0, payload) of an MQTT 5 PUBLISH (skips its properties)."""
    if packet.kind != PUBLISH:
        raise WireError(f"not a PUBLISH: type {packet.kind}")
    body = packet.body
    (tlen,) = struct.unpack_from("!H", body, 0)
    topic = body[2 : 2 + tlen].decode()
    pos = 2 + tlen
    packet_id = 0
    if (packet.flags >> 1) & 0x03:
        (packet_id,) = struct.unpack_from("!H", body, pos)
        pos += 2
    props_len, pos = _read_varint(body, pos)
    return topic, packet_id, body[pos + props_len :]
