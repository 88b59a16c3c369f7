"""What a benchmark device answers to a command (pure: no sockets here).

A device answering a command reads the PUBLISH's properties (response topic, correlation
data), acknowledges it and publishes its reply; :func:`answer` builds both as the bytes of one
socket write. The packets are :mod:`mqtt_codec`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

import mqtt_codec as codec


@dataclass(frozen=True, slots=True)
class Answer:
    """What the responder writes for one command, in one socket write."""

    data: bytes  # PUBACK (QoS 1 command) + the reply PUBLISH
    command_id: str | None
    replied: bool  # False when no command id could be found (nothing to reply to)


def command_id_of(command: codec.ParsedPublish) -> str | None:
    """The command id: the correlation data, else ``command_id`` in the JSON payload."""
    corr = command.first(codec.CORRELATION_DATA)
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


def answer(device_id: str, command: codec.ParsedPublish, reply_packet_id: int) -> Answer:
    """The PUBACK for ``command`` (if QoS 1) followed by the reply PUBLISH (QoS 1).

    The reply goes to the Response Topic property, else ``devices/{id}/replies/{command_id}``;
    the correlation data is echoed back.
    """
    ack = codec.encode_puback(command.packet_id) if command.qos else b""
    command_id = command_id_of(command)
    if command_id is None:
        return Answer(ack, None, replied=False)
    response_topic = command.first(codec.RESPONSE_TOPIC)
    topic = (
        response_topic
        if isinstance(response_topic, str) and response_topic
        else f"devices/{device_id}/replies/{command_id}"
    )
    name = command.topic.rsplit("/", 1)[-1]
    corr = command.first(codec.CORRELATION_DATA)
    reply = codec.encode_publish(
        topic,
        reply_payload(device_id, command_id, name),
        1,
        reply_packet_id,
        properties=codec.publish_properties(
            correlation_data=corr if isinstance(corr, bytes) else None
        ),
    )
    return Answer(ack + reply, command_id, replied=True)
