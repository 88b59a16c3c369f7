"""Just enough MQTT 5 for the benchmark's command responder (pure: no sockets here).

A device answering a command must read the PUBLISH's properties (response topic, correlation
data), acknowledge it and publish its reply. This module parses those properties, builds the
PUBACK and the reply PUBLISH as bytes, and reads the PUBACKs Mosquitto sends for the replies.
The framing (remaining length, packet splitting) is :mod:`bench.mqtt_wire`'s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import orjson

from bench.mqtt_wire import (
    PUBACK,
    PUBLISH,
    SUBACK,
    Packet,
    WireError,
    encode_remaining_length,
)

CONNACK_SUCCESS = 0
DISCONNECT = 14

# Property identifiers (MQTT 5 section 2.2.2.2) that may appear in a PUBLISH.
PAYLOAD_FORMAT = 0x01
MESSAGE_EXPIRY = 0x02
CONTENT_TYPE = 0x03
RESPONSE_TOPIC = 0x08
CORRELATION_DATA = 0x09
SUBSCRIPTION_ID = 0x0B
TOPIC_ALIAS = 0x23
USER_PROPERTY = 0x26

_BYTE = {PAYLOAD_FORMAT}
_U16 = {TOPIC_ALIAS}
_U32 = {MESSAGE_EXPIRY}
_UTF8 = {CONTENT_TYPE, RESPONSE_TOPIC}
_BINARY = {CORRELATION_DATA}
_VARINT = {SUBSCRIPTION_ID}

PropertyValue = int | str | bytes | tuple[str, str]


@dataclass(frozen=True, slots=True)
class Publish5:
    """An MQTT 5 PUBLISH as a device reads it."""

    topic: str
    qos: int
    packet_id: int  # 0 for QoS 0
    properties: dict[int, list[PropertyValue]] = field(default_factory=dict)
    payload: bytes = b""

    def first(self, identifier: int) -> PropertyValue | None:
        values = self.properties.get(identifier)
        return values[0] if values else None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    mult = 1
    for _ in range(4):
        if pos >= len(data):
            raise WireError("truncated variable byte integer")
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) * mult
        if not byte & 0x80:
            return value, pos
        mult *= 128
    raise WireError("variable byte integer longer than 4 bytes")


def _need(data: bytes, pos: int, n: int) -> None:
    if pos + n > len(data):
        raise WireError("truncated property")


def _string(data: bytes, pos: int) -> tuple[bytes, int]:
    _need(data, pos, 2)
    (n,) = struct.unpack_from("!H", data, pos)
    pos += 2
    _need(data, pos, n)
    return data[pos : pos + n], pos + n


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise WireError("property is not UTF-8") from exc


def parse_properties(data: bytes) -> dict[int, list[PropertyValue]]:
    """The properties of a PUBLISH (the bytes after the property length), by identifier."""
    out: dict[int, list[PropertyValue]] = {}
    pos = 0
    while pos < len(data):
        ident = data[pos]
        pos += 1
        value: PropertyValue
        if ident in _BYTE:
            _need(data, pos, 1)
            value = data[pos]
            pos += 1
        elif ident in _U16:
            _need(data, pos, 2)
            (value,) = struct.unpack_from("!H", data, pos)
            pos += 2
        elif ident in _U32:
            _need(data, pos, 4)
            (value,) = struct.unpack_from("!I", data, pos)
            pos += 4
        elif ident in _UTF8:
            raw, pos = _string(data, pos)
            value = _utf8(raw)
        elif ident in _BINARY:
            value, pos = _string(data, pos)
        elif ident in _VARINT:
            value, pos = _varint(data, pos)
        elif ident == USER_PROPERTY:
            k, pos = _string(data, pos)
            v, pos = _string(data, pos)
            value = (_utf8(k), _utf8(v))
        else:
            raise WireError(f"property 0x{ident:02x} is not allowed in a PUBLISH")
        out.setdefault(ident, []).append(value)
    return out


def parse_publish(packet: Packet) -> Publish5:
    """Topic, QoS, packet id, properties and payload of an MQTT 5 PUBLISH."""
    if packet.kind != PUBLISH:
        raise WireError(f"not a PUBLISH: type {packet.kind}")
    body = packet.body
    raw_topic, pos = _string(body, 0)
    qos = (packet.flags >> 1) & 0x03
    if qos == 3:
        raise WireError("PUBLISH with QoS 3")
    packet_id = 0
    if qos:
        _need(body, pos, 2)
        (packet_id,) = struct.unpack_from("!H", body, pos)
        pos += 2
    props_len, pos = _varint(body, pos)
    _need(body, pos, props_len)
    props = parse_properties(body[pos : pos + props_len])
    return Publish5(_utf8(raw_topic), qos, packet_id, props, body[pos + props_len :])


def _str_bytes(raw: bytes) -> bytes:
    return struct.pack("!H", len(raw)) + raw


def encode_publish(
    topic: str,
    payload: bytes,
    *,
    qos: int = 1,
    packet_id: int = 0,
    correlation_data: bytes | None = None,
) -> bytes:
    """An MQTT 5 PUBLISH, optionally carrying correlation data."""
    props = b"" if correlation_data is None else b"\x09" + _str_bytes(correlation_data)
    variable = _str_bytes(topic.encode())
    if qos:
        variable += struct.pack("!H", packet_id)
    variable += encode_remaining_length(len(props)) + props
    first = 0x30 | (qos << 1)
    return (
        bytes([first]) + encode_remaining_length(len(variable) + len(payload)) + variable + payload
    )


def puback(packet_id: int, reason: int = 0) -> bytes:
    """PUBACK; reason 0 (success) is sent in the short form (remaining length 2)."""
    if reason == 0:
        return b"\x40\x02" + struct.pack("!H", packet_id)
    return b"\x40\x03" + struct.pack("!HB", packet_id, reason)


def puback_parts(packet: Packet) -> tuple[int, int]:
    """(packet id, reason code) of a PUBACK; a 2-byte PUBACK means success (0)."""
    if packet.kind != PUBACK:
        raise WireError(f"not a PUBACK: type {packet.kind}")
    if len(packet.body) < 2:
        raise WireError("PUBACK shorter than its packet id")
    (packet_id,) = struct.unpack_from("!H", packet.body, 0)
    reason = packet.body[2] if len(packet.body) > 2 else 0
    return packet_id, reason


def suback_reasons(packet: Packet) -> tuple[int, list[int]]:
    """(packet id, reason codes) of an MQTT 5 SUBACK (granted QoS, or >= 0x80 on failure)."""
    if packet.kind != SUBACK:
        raise WireError(f"not a SUBACK: type {packet.kind}")
    body = packet.body
    _need(body, 0, 2)
    (packet_id,) = struct.unpack_from("!H", body, 0)
    props_len, pos = _varint(body, 2)
    pos += props_len
    if pos > len(body):
        raise WireError("truncated SUBACK")
    return packet_id, list(body[pos:])


def connack_reason(packet: Packet) -> int:
    """The reason code of an MQTT 5 CONNACK (0 = success)."""
    if len(packet.body) < 2:
        raise WireError("CONNACK too short")
    return packet.body[1]


# -- answering a command -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What the responder writes for one command, in one socket write."""

    data: bytes  # PUBACK (QoS 1 command) + the reply PUBLISH
    command_id: str | None
    replied: bool  # False when no command id could be found (nothing to reply to)


def command_id_of(command: Publish5) -> str | None:
    """The command id: the correlation data, else ``command_id`` in the JSON payload."""
    corr = command.first(CORRELATION_DATA)
    if isinstance(corr, bytes) and corr:
        return corr.decode("utf-8", "replace")
    try:
        doc = orjson.loads(command.payload) if command.payload else None
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, dict):
        value = doc.get("command_id")
        if isinstance(value, str) and value:
            return value
    return None


def reply_payload(device_id: str, command_id: str, command_name: str) -> bytes:
    """``{"command_id", "status": "ok", "result": {...}}``: what a device answers."""
    return orjson.dumps(
        {
            "command_id": command_id,
            "status": "ok",
            "result": {"device_id": device_id, "command": command_name},
        }
    )


def answer(device_id: str, command: Publish5, reply_packet_id: int) -> Answer:
    """The PUBACK for ``command`` (if QoS 1) followed by the reply PUBLISH (QoS 1).

    The reply goes to the Response Topic property, else ``devices/{id}/replies/{command_id}``;
    the correlation data is echoed back.
    """
    ack = puback(command.packet_id) if command.qos else b""
    command_id = command_id_of(command)
    if command_id is None:
        return Answer(ack, None, replied=False)
    response_topic = command.first(RESPONSE_TOPIC)
    topic = (
        response_topic
        if isinstance(response_topic, str) and response_topic
        else f"devices/{device_id}/replies/{command_id}"
    )
    name = command.topic.rsplit("/", 1)[-1]
    corr = command.first(CORRELATION_DATA)
    reply = encode_publish(
        topic,
        reply_payload(device_id, command_id, name),
        qos=1,
        packet_id=reply_packet_id,
        correlation_data=corr if isinstance(corr, bytes) else None,
    )
    return Answer(ack + reply, command_id, replied=True)
