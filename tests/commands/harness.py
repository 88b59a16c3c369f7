"""Test helpers for the command path: simulated devices (paho) and Kafka record collectors."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from commands.client import Tail
from commands.status import StatusRecord, decode_status
from tests.plugins.mqtt_logins import set_login


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Received:
    topic: str
    command_id: str
    attempt: int | None
    args: dict[str, Any]
    response_topic: str | None
    expiry_s: int | None


def answer_sum(device_id: str, received: Received) -> dict[str, Any]:
    """The test devices' behaviour: ``{"status": "ok", "result": {"sum": a + b, "by": id}}``."""
    args = received.args
    return {
        "status": "ok",
        "result": {"sum": args.get("a", 0) + args.get("b", 0), "by": device_id},
    }


@dataclass
class Device:
    """A simulated MQTT 5 device (paho, own thread).

    ``mode``: ``"answer"`` replies at once with `answer_sum`, ``"silent"`` never replies,
    ``"hold"`` keeps the commands until `release` is called.
    """

    device_id: str
    host: str
    port: int
    groups: tuple[str, ...] = ()
    mode: str = "answer"
    persistent: bool = False
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _client: mqtt.Client | None = None
    _subscribed: threading.Event = field(default_factory=threading.Event)

    def connect(self, timeout: float = 10.0) -> Device:
        self._subscribed.clear()
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.device_id,
            protocol=mqtt.MQTTv5,
        )
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)
        if self.persistent:
            props.SessionExpiryInterval = 600
        # set before connecting: a persistent session may deliver at once
        self._client = client
        set_login(client, self.port)
        client.connect(self.host, self.port, clean_start=not self.persistent, properties=props)
        client.loop_start()
        wait_for(self._subscribed.is_set, timeout, f"{self.device_id} subscribed")
        return self

    def disconnect(self) -> None:
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, rc: Any, props: Any
    ) -> None:
        topics = [(f"devices/{self.device_id}/commands/+", SubscribeOptions(qos=1))]
        topics += [(f"groups/{g}/commands/+", SubscribeOptions(qos=1)) for g in self.groups]
        client.subscribe(topics)

    def _on_subscribe(
        self, client: mqtt.Client, userdata: Any, mid: int, rcs: Any, props: Any
    ) -> None:
        self._subscribed.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        props = msg.properties
        correlation = getattr(props, "CorrelationData", b"")
        cid = correlation.decode() if isinstance(correlation, bytes) else ""
        attempt = None
        for key, value in getattr(props, "UserProperty", []):
            if key == "attempt":
                attempt = int(value)
        args = orjson.loads(msg.payload)
        received = Received(
            msg.topic,
            cid or args.get("command_id", ""),
            attempt,
            args,
            getattr(props, "ResponseTopic", None),
            getattr(props, "MessageExpiryInterval", None),
        )
        with self._lock:
            self.received.append(received)
        if self.mode == "answer":
            self.reply(received)

    def reply(self, received: Received, doc: dict[str, Any] | None = None) -> mqtt.MQTTMessageInfo:
        assert self._client is not None
        topic = received.response_topic or f"devices/{self.device_id}/replies/{received.command_id}"
        body = doc if doc is not None else answer_sum(self.device_id, received)
        return self._client.publish(topic, orjson.dumps(body), qos=1)

    def release(self, timeout: float = 10.0) -> None:
        """Answer every held command; return once Mosquitto has acknowledged the replies."""
        infos = [self.reply(received) for received in self.commands()]
        wait_for(lambda: all(i.is_published() for i in infos), timeout, "replies PUBACKed")

    def commands(self) -> list[Received]:
        with self._lock:
            return list(self.received)


def forget_session(host: str, port: int, client_id: str) -> None:
    """Remove a persistent MQTT session from Mosquitto (clean start, session expiry 0)."""
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5
    )
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 0
    connected = threading.Event()
    client.on_connect = lambda *args: connected.set()
    set_login(client, port)
    client.connect(host, port, clean_start=True, properties=props)
    client.loop_start()
    try:
        connected.wait(5)
    finally:
        client.disconnect()
        client.loop_stop()


class Records:
    """Everything written to a set of (unique, per-test) topics, read from the beginning."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self._tail = Tail(bootstrap, topics, from_beginning=True)
        self.by_topic: dict[str, list[tuple[bytes | None, bytes | None]]] = {t: [] for t in topics}

    def poll(self) -> None:
        for msg in self._tail.poll(0.05):
            topic = msg.topic()
            assert topic is not None
            self.by_topic[topic].append((msg.key(), msg.value()))

    def values(self, topic: str) -> list[dict[str, Any]]:
        return [orjson.loads(v) for _, v in self.by_topic[topic] if v is not None]

    def statuses(self, topic: str, command_id: str | None = None) -> list[StatusRecord]:
        out = []
        for key, value in self.by_topic[topic]:
            status = decode_status(key, value)
            if status is not None and (command_id is None or status.command_id == command_id):
                out.append(status)
        return out

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        def check() -> bool:
            self.poll()
            return predicate()

        wait_for(check, timeout, what)

    def close(self) -> None:
        self._tail.close()
