"""Packets decoded: what a client receives (CONNACK, SUBACK, PUBLISH, PUBACK, DISCONNECT), and
CONNECT (for tests and fake servers).

Each decoder takes a packet's body (after the fixed header, see :mod:`mqtt_codec.framing`) and
raises :class:`MqttProtocolError` for bytes it cannot accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from mqtt_codec.constants import MQTT_3_1_1, MQTT_5, RECEIVE_MAXIMUM
from mqtt_codec.errors import MqttProtocolError
from mqtt_codec.properties import (
    PropertyValue,
    decode_properties,
    decode_text,
    parse_publish_properties,
    read_binary,
)
from mqtt_codec.reasons import CONNACK_REASONS
from mqtt_codec.varint import decode_varint

# the properties of an MQTT 3.1.1 PUBLISH (one shared, read-only, empty mapping)
_NO_PROPERTIES: Final[Mapping[int, Sequence[PropertyValue]]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Connect:
    """A CONNECT without a will (the only kind :func:`encode_connect` builds)."""

    client_id: str
    protocol_level: int
    keepalive: int
    clean_start: bool
    properties: dict[int, object]  # as decode_properties gives them; none for MQTT 3.1.1
    username: str
    password: bytes


def decode_connect(body: bytes) -> Connect:
    """A CONNECT body (MQTT 3.1.1 or 5); a will is refused as unsupported."""
    size = len(body)
    name, pos = read_binary(body, 0, size)
    if name != b"MQTT" or pos + 4 > size:
        raise MqttProtocolError("not an MQTT CONNECT")
    level, flags = body[pos], body[pos + 1]
    keepalive = (body[pos + 2] << 8) | body[pos + 3]
    pos += 4
    if level not in (MQTT_3_1_1, MQTT_5):
        raise MqttProtocolError(f"unsupported protocol level {level}")
    if flags & 0x01:
        raise MqttProtocolError("CONNECT reserved flag set")
    if flags & 0x04:
        raise MqttProtocolError("CONNECT with a will: not supported")
    properties: dict[int, object] = {}
    if level == MQTT_5:
        properties, pos = decode_properties(body, pos)
    raw, pos = read_binary(body, pos, size)
    client_id = decode_text(raw)
    username = ""
    if flags & 0x80:
        raw, pos = read_binary(body, pos, size)
        username = decode_text(raw)
    password = b""
    if flags & 0x40:
        password, pos = read_binary(body, pos, size)
    if pos != size:
        raise MqttProtocolError("bytes after the CONNECT payload")
    return Connect(client_id, level, keepalive, bool(flags & 0x02), properties, username, password)


@dataclass(frozen=True, slots=True)
class Connack:
    session_present: bool
    reason: int  # the MQTT 3.1.1 return code is in the same place
    receive_maximum: int = 65535  # the server's: QoS 1 publishes it takes unacknowledged

    @property
    def reason_text(self) -> str:
        return CONNACK_REASONS.get(self.reason, f"reason 0x{self.reason:02x}")


def decode_connack(body: bytes) -> Connack:
    if len(body) < 2:
        raise MqttProtocolError("short CONNACK")
    receive_maximum = 65535
    if len(body) > 2:
        value = decode_properties(body, 2)[0].get(RECEIVE_MAXIMUM, receive_maximum)
        assert isinstance(value, int)
        receive_maximum = value
    return Connack(bool(body[0] & 0x01), body[1], receive_maximum)


def decode_puback(body: bytes) -> tuple[int, int]:
    """(packet id, reason code); a 2-byte PUBACK means Success (MQTT 5 3.4.2.1)."""
    if len(body) < 2:
        raise MqttProtocolError("short PUBACK")
    return (body[0] << 8) | body[1], body[2] if len(body) > 2 else 0


def decode_suback(body: bytes) -> tuple[int, list[int]]:
    """(packet id, reason codes: the granted QoS, or >= 0x80 on failure) of an MQTT 5 SUBACK."""
    if len(body) < 3:
        raise MqttProtocolError("short SUBACK")
    packet_id = (body[0] << 8) | body[1]
    decoded = decode_varint(body, 2)
    if decoded is None:
        raise MqttProtocolError("short SUBACK properties")
    plen, pos = decoded
    if pos + plen > len(body):
        raise MqttProtocolError("short SUBACK properties")
    return packet_id, list(body[pos + plen :])


def decode_disconnect_reason(body: bytes) -> int:
    return body[0] if body else 0


@dataclass(frozen=True, slots=True)
class Publish:
    """An inbound PUBLISH, its properties skipped (:func:`decode_publish`)."""

    topic: str
    payload: bytes
    qos: int
    packet_id: int  # 0 for QoS 0
    dup: bool
    retain: bool


@dataclass(frozen=True, slots=True)
class ParsedPublish(Publish):
    """An inbound PUBLISH with its properties (:func:`parse_publish`). A subclass rather than
    one more field of :class:`Publish`: each field costs the fast decoder ~0.1 us."""

    # by identifier, every value in order (none for MQTT 3.1.1)
    properties: Mapping[int, Sequence[PropertyValue]]

    def first(self, identifier: int) -> PropertyValue | None:
        """The first value of property ``identifier``, or None."""
        values = self.properties.get(identifier)
        return values[0] if values else None


def decode_publish(first_byte: int, body: bytes) -> Publish:
    """Decode an MQTT 5 PUBLISH body (after the fixed header), skipping its properties.

    The fast decoder (the command path's replies); :func:`parse_publish` also reads the
    properties and checks every length.
    """
    try:
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
    except IndexError as exc:
        raise MqttProtocolError("short PUBLISH") from exc
    return Publish(topic, body[pos:], qos, packet_id, bool(first_byte & 0x08), bool(first_byte & 1))


def parse_publish(first_byte: int, body: bytes, protocol_level: int = MQTT_5) -> ParsedPublish:
    """Topic, QoS, packet id, properties (MQTT 5) and payload of a PUBLISH, every length
    checked and the topic strict UTF-8; ``protocol_level=4`` reads an MQTT 3.1.1 PUBLISH."""
    qos = (first_byte >> 1) & 0x03
    if qos == 3:
        raise MqttProtocolError("PUBLISH with QoS 3")
    size = len(body)
    raw_topic, pos = read_binary(body, 0, size)
    packet_id = 0
    if qos:
        if pos + 2 > size:
            raise MqttProtocolError("short PUBLISH")
        packet_id = (body[pos] << 8) | body[pos + 1]
        pos += 2
    properties: Mapping[int, Sequence[PropertyValue]] = _NO_PROPERTIES
    if protocol_level == MQTT_5:
        decoded = decode_varint(body, pos)
        if decoded is None or decoded[0] + decoded[1] > size:
            raise MqttProtocolError("short PUBLISH properties")
        props_len, pos = decoded
        properties = parse_publish_properties(body[pos : pos + props_len])
        pos += props_len
    return ParsedPublish(
        decode_text(raw_topic),
        body[pos:],
        qos,
        packet_id,
        bool(first_byte & 0x08),
        bool(first_byte & 1),
        properties,
    )
