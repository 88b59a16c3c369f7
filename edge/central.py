"""The centre's view of its sites (adapter: MQTT): the retained link-state and status
messages every site leaves on ``[tenants/{t}/]sites/{site}/{state,status}``."""

from __future__ import annotations

import ssl
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge.errors import EdgeError
from edge.status import SiteView, site_views

SITE_FILTERS = ("sites/+/state", "sites/+/status", "tenants/+/sites/+/state",
                "tenants/+/sites/+/status")  # fmt: skip


class CentralWatch:
    """Keeps the newest state/status message of every site; :meth:`views` turns them into
    per-site views at any moment."""

    def __init__(
        self, host: str, port: int, username: str, password: str, ca_file: str = ""
    ) -> None:
        self._lock = threading.Lock()
        self._retained: dict[str, bytes] = {}
        self._subscribed = threading.Event()
        self._refused: str | None = None
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311, clean_session=True
        )
        client.username_pw_set(username, password)
        if ca_file:
            client.tls_set(ca_certs=ca_file, tls_version=ssl.PROTOCOL_TLS_CLIENT)
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        self._client = client
        self._host, self._port = host, port

    def _on_connect(
        self, client: mqtt.Client, _u: object, _f: object, reason: object, _p: object
    ) -> None:
        if getattr(reason, "is_failure", False):
            self._refused = str(reason)
            self._subscribed.set()
            return
        client.subscribe([(f, 0) for f in SITE_FILTERS])

    def _on_subscribe(self, *_args: object) -> None:
        self._subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self._retained[msg.topic] = bytes(msg.payload)

    def start(self, timeout_s: float = 10.0) -> None:
        try:
            self._client.connect(self._host, self._port, keepalive=30)
        except OSError as exc:
            raise EdgeError(f"cannot reach the centre at {self._host}:{self._port}: {exc}") from exc
        self._client.loop_start()
        if not self._subscribed.wait(timeout_s):
            raise EdgeError("no answer from the centre's Mosquitto")
        if self._refused is not None:
            raise EdgeError(f"the centre refused the login: {self._refused}")

    def views(self) -> list[SiteView]:
        with self._lock:
            retained = dict(self._retained)
        return site_views(retained, int(time.time() * 1000))

    def stop(self) -> None:
        self._client.loop_stop()
        self._client.disconnect()


def snapshot(
    host: str, port: int, username: str, password: str, *, ca_file: str = "", settle_s: float = 1.0
) -> list[SiteView]:
    """One look: connect, take the retained messages, disconnect."""
    watch = CentralWatch(host, port, username, password, ca_file)
    watch.start()
    try:
        time.sleep(settle_s)  # retained messages follow the SUBACK; no marker ends them
        return watch.views()
    finally:
        watch.stop()
