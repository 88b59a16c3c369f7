"""The site supervisor's MQTT client on the local broker (adapter: MQTT).

Reads ``$SYS`` counters and the bridge's link-state notification, publishes the site's status
(retained, QoS 0: a status older than the link's return is worth nothing, so it is never queued
for the bridge). paho's callbacks only store values; nothing blocks there.
"""

from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge.status import SYS_TOPICS


class SiteMonitor:
    def __init__(
        self, host: str, port: int, username: str, password: str, state_topic: str
    ) -> None:
        self._host, self._port = host, port
        self._username, self._password = username, password
        self.state_topic = state_topic
        self._lock = threading.Lock()
        self._values: dict[str, str] = {}
        self._client: mqtt.Client | None = None

    def start(self) -> None:
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self._username,
            protocol=mqtt.MQTTv311,
            clean_session=True,
        )
        client.username_pw_set(self._username, self._password)
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        client.reconnect_delay_set(1, 5)
        client.connect_async(self._host, self._port, keepalive=30)
        client.loop_start()
        self._client = client

    def _on_connect(self, client: mqtt.Client, *_args: object) -> None:
        client.subscribe([(t, 0) for t in (*SYS_TOPICS, self.state_topic)])

    def _on_message(self, _client: mqtt.Client, _userdata: object, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self._values[msg.topic] = msg.payload.decode(errors="replace")

    def values(self) -> dict[str, str]:
        with self._lock:
            return dict(self._values)

    def forget(self) -> None:
        """After a broker restart: old counters and link state no longer hold."""
        with self._lock:
            self._values.clear()

    def publish_status(self, topic: str, payload: bytes) -> None:
        if self._client is not None and self._client.is_connected():
            self._client.publish(topic, payload, qos=0, retain=True)

    def stop(self) -> None:
        if self._client is not None:
            self._client.loop_stop()
            self._client.disconnect()
            self._client = None
