"""The responder's answer to a command, against hand-encoded commands (MQTT 5 3.3, 3.4)."""

from __future__ import annotations

import orjson
import pytest

import mqtt_codec as codec
from bench.responder_logic import answer
from tests.mqtt_codec.command_packets import SERVICE_PROPS, command_body


def _command_packet(
    topic: bytes, packet_id: int, props: bytes, payload: bytes, qos: int = 1
) -> codec.Packet:
    return codec.Packet(
        codec.PUBLISH, qos << 1, command_body(topic, packet_id, props, payload, qos)
    )


def _parse(packet: codec.Packet) -> codec.ParsedPublish:
    return codec.parse_publish((packet.kind << 4) | packet.flags, packet.body)


def _split(data: bytes) -> list[codec.Packet]:
    return codec.StreamReader().feed(data)


def test_answer_writes_puback_then_reply_to_the_response_topic() -> None:
    packet = _command_packet(b"devices/d1/commands/reboot", 513, SERVICE_PROPS, b"{}")
    ans = answer("d1", _parse(packet), 9)
    assert (ans.command_id, ans.replied) == ("c-42", True)
    ack, reply = _split(ans.data)
    assert codec.decode_puback(ack.body) == (513, 0)
    pub = _parse(reply)
    assert (pub.topic, pub.qos, pub.packet_id) == ("devices/d1/replies/c-42", 1, 9)
    assert pub.first(codec.CORRELATION_DATA) == b"c-42"
    assert orjson.loads(pub.payload) == {
        "command_id": "c-42",
        "status": "ok",
        "result": {"device_id": "d1", "command": "reboot"},
    }


def test_answer_without_properties_uses_the_json_command_id() -> None:
    # an MQTT 3.1.1-style command: no properties, command_id in the JSON
    packet = _command_packet(b"devices/d7/commands/set", 1, b"", b'{"command_id":"x1","v":3}')
    ack, reply = _split(answer("d7", _parse(packet), 65535).data)
    assert codec.decode_puback(ack.body) == (1, 0)
    pub = _parse(reply)
    assert (pub.topic, pub.packet_id) == ("devices/d7/replies/x1", 65535)
    assert pub.properties == {}
    assert orjson.loads(pub.payload)["command_id"] == "x1"


def test_answer_qos0_command_has_no_puback() -> None:
    packet = _command_packet(b"devices/d7/commands/set", 0, b"", b'{"command_id":"x2"}', qos=0)
    (reply,) = _split(answer("d7", _parse(packet), 3).data)
    assert _parse(reply).topic == "devices/d7/replies/x2"


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1,2]", b'{"command_id": 5}'])
def test_answer_without_any_command_id_only_acks(payload: bytes) -> None:
    packet = _command_packet(b"devices/d7/commands/set", 4, b"", payload)
    ans = answer("d7", _parse(packet), 1)
    assert (ans.replied, ans.command_id, ans.data) == (False, None, b"\x40\x02\x00\x04")
