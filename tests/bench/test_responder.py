"""The cheap responder answers commands through the real Mosquitto like a device would."""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

import orjson
import pytest

import mqtt_codec as codec
from bench.responder import Responder, ResponderSpec


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class _Client:
    """A raw MQTT 5 client playing the command service: publishes commands, reads replies."""

    def __init__(self, host: str, port: int, topic_filter: str) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.reader = codec.StreamReader()
        self.sock.sendall(
            codec.encode_connect(
                f"svc-{uuid.uuid4().hex[:8]}", keepalive=0, clean_start=True, receive_maximum=65535
            )
            + codec.encode_subscribe(1, (topic_filter,), 1)
        )
        self.packets: list[codec.Packet] = []
        self.read_until(lambda: any(p.kind == codec.SUBACK for p in self.packets))
        self.packets.clear()

    def read_until(self, done: Any, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError("no answer from Mosquitto in time")
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            assert data, "Mosquitto closed the connection"
            self.packets += self.reader.feed(data)

    def close(self) -> None:
        self.sock.sendall(codec.DISCONNECT_NORMAL)
        self.sock.close()


@pytest.mark.integration
def test_responder_answers_each_command_once(local_stack_factory: Any) -> None:
    # An anonymous private stack, explicitly: the responder is a benchmark's device fleet (it
    # measures the command path, not the log-in) and follows any Response Topic, here one
    # (svc/replies/...) that no device role may publish to.
    stack = local_stack_factory(partitions=1, insecure_anonymous=True)
    prefix = f"resp{uuid.uuid4().hex[:6]}"
    devices = [f"{prefix}-{i}" for i in range(4)]
    responder = Responder(ResponderSpec(stack.mqtt_host, stack.mqtt_port, devices, processes=2))
    responder.start()
    client = _Client(stack.mqtt_host, stack.mqtt_port, "devices/+/replies/+")
    try:
        sent: dict[str, str] = {}
        for i, dev in enumerate(devices):
            cid = f"c{i}"
            sent[cid] = dev
            props_topic = f"svc/replies/{cid}" if i == 0 else None  # a custom response topic
            if props_topic is not None:
                # the reply follows the Response Topic property: listen there too
                client.sock.sendall(codec.encode_subscribe(2, ("svc/replies/+",), 1))
            packet = _command(f"devices/{dev}/commands/set", i + 1, cid, props_topic)
            client.sock.sendall(packet)
        # one command without properties: the id comes from the JSON
        sent["j1"] = devices[1]
        client.sock.sendall(
            codec.encode_publish(
                f"devices/{devices[1]}/commands/ping", b'{"command_id":"j1"}', 1, 99
            )
        )
        replies: dict[str, tuple[str, dict[str, Any]]] = {}

        def all_replied() -> bool:
            for p in client.packets:
                if p.kind == codec.PUBLISH:
                    pub = codec.parse_publish((p.kind << 4) | p.flags, p.body)
                    doc = orjson.loads(pub.payload)
                    replies[doc["command_id"]] = (pub.topic, doc)
                    client.sock.sendall(codec.encode_puback(pub.packet_id))
            client.packets = [p for p in client.packets if p.kind != codec.PUBLISH]
            return len(replies) == len(sent)

        client.read_until(all_replied)
        assert replies["c0"][0] == "svc/replies/c0"
        for cid, dev in sent.items():
            topic, doc = replies[cid]
            if cid != "c0":
                assert topic == f"devices/{dev}/replies/{cid}"
            assert doc["status"] == "ok"
            assert doc["result"]["device_id"] == dev
        # counted: 5 commands, 5 replies, and Mosquitto acked every reply (to a subscriber)
        _wait(lambda: responder.counts()["reply_acks"] == 5, 10, "the replies' PUBACKs")
        counts = responder.counts()
        assert counts == {
            "commands": 5,
            "replies": 5,
            "reply_acks": 5,
            "reply_ack_errors": 0,
            "unanswerable": 0,
        }
        assert responder.failed() is None
    finally:
        client.close()
        responder.stop()


def _command(topic: str, packet_id: int, cid: str, response_topic: str | None) -> bytes:
    props = b"\x09" + len(cid).to_bytes(2, "big") + cid.encode()
    if response_topic is not None:
        raw = response_topic.encode()
        props += b"\x08" + len(raw).to_bytes(2, "big") + raw
    body = len(topic).to_bytes(2, "big") + topic.encode() + packet_id.to_bytes(2, "big")
    body += codec.encode_varint(len(props)) + props + b'{"v":1}'
    return b"\x32" + codec.encode_varint(len(body)) + body
