"""Test-side MQTT publishing and Kafka reading (real clients, no bridge code)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import paho.mqtt.client as mqtt
from confluent_kafka import Consumer, KafkaError
from paho.mqtt.enums import CallbackAPIVersion

from tests.plugins.mqtt_logins import set_login


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]

    def json(self) -> dict[str, object]:
        doc = orjson.loads(self.value)
        assert isinstance(doc, dict)
        return doc


class Publisher:
    """One paho MQTT 5 client publishing for many device topics (order kept per connection)."""

    def __init__(self, host: str, port: int, inflight: int = 1000) -> None:
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"pub-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv5,
        )
        self.client.max_inflight_messages_set(inflight)
        self.client.max_queued_messages_set(0)
        set_login(self.client, port)
        self.client.connect(host, port)
        self.client.loop_start()
        deadline = time.monotonic() + 10
        while not self.client.is_connected():
            if time.monotonic() > deadline:
                raise TimeoutError("publisher could not connect")
            time.sleep(0.01)
        self.infos: list[mqtt.MQTTMessageInfo] = []

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> mqtt.MQTTMessageInfo:
        info = self.client.publish(topic, payload, qos=qos)
        self.infos.append(info)
        return info

    def wait_all(self, timeout: float = 60.0) -> None:
        """Wait until Mosquitto acknowledged every QoS 1 publish."""
        deadline = time.monotonic() + timeout
        for info in self.infos:
            info.wait_for_publish(max(0.01, deadline - time.monotonic()))
            if not info.is_published():
                raise TimeoutError("Mosquitto did not acknowledge every publish in time")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def publish_rounds(host: str, port: int, devices: list[str], rounds: range) -> None:
    """Publish one QoS 1 telemetry message per device per round, seq = round; wait for PUBACKs."""
    pub = Publisher(host, port)
    try:
        for seq in rounds:
            for device in devices:
                pub.publish(f"devices/{device}/telemetry", telemetry(seq))
        pub.wait_all()
    finally:
        pub.close()


def telemetry(seq: int, *, ts: int | None = None, **metrics: float) -> bytes:
    return orjson.dumps(
        {
            "ts": ts if ts is not None else int(time.time() * 1000),
            "seq": seq,
            "metrics": metrics or {"temp": 20.0 + seq % 7, "n": seq},
        }
    )


def device_prefix() -> str:
    """A unique device-id prefix, so tests on the shared Mosquitto never see each other."""
    return f"t{uuid.uuid4().hex[:6]}-"


def consume(
    bootstrap: str,
    topics: Iterable[str],
    *,
    until: Callable[[list[Record]], bool],
    timeout: float = 60.0,
) -> list[Record]:
    """Read ``topics`` from the beginning until ``until(records)`` is true (or timeout)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:10]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.subscribe(list(topics))
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(out):
            for msg in consumer.consume(2000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error: {err}")
                raw_headers: list[tuple[str, Any]] = list(msg.headers() or [])  # type: ignore[arg-type]
                headers = {k: v for k, v in raw_headers if isinstance(v, bytes)}
                out.append(
                    Record(
                        str(msg.topic()),
                        int(msg.partition() or 0),
                        int(msg.offset() or 0),
                        msg.key(),
                        msg.value() or b"",
                        headers,
                    )
                )
    finally:
        consumer.close()
    return out


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


class BackgroundPublisher:
    """Publishes ``per_device`` QoS 1 telemetry messages per device, round-robin, in a thread."""

    def __init__(
        self, host: str, port: int, devices: list[str], per_device: int, rate: float
    ) -> None:
        self.pub = Publisher(host, port)
        self.devices = devices
        self.per_device = per_device
        self.rate = rate
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundPublisher:
        self.thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        for seq in range(self.per_device):
            for device in self.devices:
                self.pub.publish(f"devices/{device}/telemetry", telemetry(seq))
                self.sent += 1
                ahead = self.sent / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)

    def join(self, timeout: float = 120.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "publisher thread did not finish"
        self.pub.wait_all()
        self.pub.close()
