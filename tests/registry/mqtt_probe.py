"""A small synchronous MQTT 5 client over paho for the access-control tests."""

from __future__ import annotations

import ssl
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

WAIT = 10.0


class Probe:
    def __init__(
        self,
        port: int,
        username: str | None,
        password: str | None,
        client_id: str | None = None,
        tls: tuple[Path, Path | None, Path | None] | None = None,
    ) -> None:
        """``tls``: (CA file, client certificate, client key) for a TLS listener."""
        self.connack: ReasonCode | None = None
        self.error: Exception | None = None  # a TLS handshake refused before MQTT began
        self.disconnect: ReasonCode | None = None
        self.disconnected_at: float | None = None
        self.messages: list[tuple[str, bytes]] = []
        self._acks: dict[int, Any] = {}
        self._connected = threading.Event()
        self._gone = threading.Event()
        self._cv = threading.Condition()
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or username or f"anon-{uuid.uuid4().hex[:6]}",
            protocol=mqtt.MQTTv5,
        )
        if username is not None:
            client.username_pw_set(username, password)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_subscribe = self._on_subscribe
        client.on_message = lambda _c, _u, m: self.messages.append((m.topic, bytes(m.payload)))
        self.client = client
        if tls is not None:
            ca, cert, key = (str(p) if p else None for p in tls)
            client.tls_set(ca_certs=ca, certfile=cert, keyfile=key)
        try:
            client.connect("127.0.0.1", port, keepalive=30)
        except (OSError, ssl.SSLError) as exc:  # TLS 1.2 fails here, 1.3 on the first read
            self.error = exc
            return
        client.loop_start()
        self._connected.wait(WAIT)

    @property
    def connected(self) -> bool:
        return self.connack is not None and not self.connack.is_failure and not self._gone.is_set()

    def _on_connect(self, _c: Any, _u: Any, _f: Any, rc: ReasonCode, _p: Any) -> None:
        self.connack = rc
        self._connected.set()

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, rc: ReasonCode, _p: Any) -> None:
        self.disconnect = rc
        self.disconnected_at = time.monotonic()
        self._gone.set()
        self._connected.set()

    def _on_publish(self, _c: Any, _u: Any, mid: int, rc: ReasonCode, _p: Any) -> None:
        with self._cv:
            self._acks[mid] = rc
            self._cv.notify_all()

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, rcs: list[ReasonCode], _p: Any) -> None:
        with self._cv:
            self._acks[mid] = rcs
            self._cv.notify_all()

    def _wait_ack(self, mid: int) -> Any:
        with self._cv:
            assert self._cv.wait_for(lambda: mid in self._acks, WAIT), f"no ack for {mid}"
            return self._acks.pop(mid)

    def publish(self, topic: str, payload: bytes = b"{}", qos: int = 1) -> ReasonCode:
        """The PUBACK reason code of a QoS 1 publish."""
        info = self.client.publish(topic, payload, qos=qos)
        return self._wait_ack(info.mid)

    def subscribe(self, topic: str) -> ReasonCode:
        _, mid = self.client.subscribe(topic, qos=1)
        assert mid is not None
        (rc,) = self._wait_ack(mid)
        return rc

    def wait_gone(self, timeout: float) -> bool:
        return self._gone.wait(timeout)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def wait_for(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` passes; its last value."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def connack_of(
    port: int, username: str | None, password: str | None, client_id: str | None = None
) -> ReasonCode:
    """The CONNACK reason code Mosquitto answers (fails the test if none came)."""
    probe = Probe(port, username, password, client_id)
    try:
        assert probe.connack is not None, "no CONNACK"
        return probe.connack
    finally:
        probe.close()
