"""One device's MQTT session (gmqtt): connect, publish with acknowledgement tracking, leave.

The client id is the device id, with clean start off and a Last Will of ``offline`` retained on
``devices/{id}/status``. After each connect the device publishes a retained ``online`` and
subscribes to its commands and its groups' broadcasts (in ``on_connect``, so reconnects renew
them). QoS 1 acknowledgements are tracked per packet id (see :mod:`device_sim.ack_tracker`),
so the manifest knows exactly which seqs Mosquitto acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from gmqtt import Client, Message, Subscription

from device_sim.ack_tracker import AckTracker
from device_sim.commands import subscriptions
from device_sim.counters import DeviceRecord, Stats
from device_sim.device import Outgoing
from device_sim.pacing import ConnectLimiter
from device_sim.run_config import Endpoints, RunOptions

log = logging.getLogger(__name__)

UNLIMITED_RECONNECTS = -1
DISCONNECT_WITH_WILL = 0x04  # MQTT 5 reason code: "disconnect with Will Message"
# gmqtt's on_message(client, topic, payload, qos, properties) -> MQTT reason code
MessageHandler = Callable[[Client, str, bytes, int, Any], int]
# ack tags: telemetry seq n -> n, event seq n -> EVENT_TAG_BASE + n, malformed -> -1, -2, ...
EVENT_TAG_BASE = 1 << 40


class DeviceSession:
    """The MQTT side of one device; counts into ``stats`` and the device's ``record``."""

    def __init__(
        self,
        device_id: str,
        groups: Sequence[str],
        *,
        endpoints: Endpoints,
        options: RunOptions,
        stats: Stats,
        record: DeviceRecord,
        limiter: ConnectLimiter,
        stop: asyncio.Event,
        on_message: MessageHandler,
    ) -> None:
        self.id = device_id
        self.groups = list(groups)
        self.endpoints = endpoints
        self.options = options
        self.stats = stats
        self.record = record
        self.limiter = limiter
        self.stop = stop
        self.status_topic = f"devices/{device_id}/status"
        self._on_message = on_message
        self._unacked: set[int] = set()
        self._malformed_pending: dict[int, dict[str, Any]] = {}
        self._next_malformed_tag = -1  # malformed publishes have no seq: tag them -1, -2, ...
        self._tracker = AckTracker(self._on_ack)
        self._client: Client | None = None
        self._up = False  # between on_connect and on_disconnect

    def open(self) -> None:
        """Create the client (not connected yet)."""
        will = Message(self.status_topic, b"offline", qos=1, retain=True)
        client = Client(
            self.id,
            clean_session=False,
            will_message=will,
            persistent_storage=self._tracker,
            session_expiry_interval=self.options.session_expiry_s,
            logger=logging.getLogger("gmqtt.client"),
        )
        client.set_config({"reconnect_retries": UNLIMITED_RECONNECTS, "reconnect_delay": 1})
        auth = self.endpoints.auth_for(self.id)
        if auth is not None:
            client.set_auth_credentials(*auth)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        self._client = client

    def _on_connect(self, client: Client, flags: int, rc: int, properties: Any) -> None:
        if not self._up:
            self._up = True
            self.stats.connected += 1
        self.stats.connects += 1
        self.record.connects += 1
        topics = subscriptions(self.id, self.groups)
        client.subscribe([Subscription(t, qos=1) for t in topics])

    def _on_disconnect(self, client: Client, packet: Any, exc: Any = None) -> None:
        # gmqtt also calls this when a connection attempt fails (no on_connect before it):
        # counting those drove `connected` below zero while a big fleet was connecting
        if self._up:
            self._up = False
            self.stats.connected -= 1

    def _on_ack(self, tag: int) -> None:
        if tag in self._unacked:
            self._unacked.discard(tag)
            self.stats.awaiting_ack -= 1
            self.stats.acked += 1

    async def connect(self) -> bool:
        """Connect (paced, retried with back-off) and announce ``online``; False on giving up."""
        assert self._client is not None
        delay = 0.5
        for attempt in range(1, self.options.connect_attempts + 1):
            await self.limiter.acquire()
            try:
                await self._client.connect(
                    self.endpoints.mqtt_host,
                    self.endpoints.mqtt_port,
                    keepalive=self.options.keepalive_s,
                )
            except Exception as exc:  # noqa: BLE001 (gmqtt raises OSError, MQTTConnectError, ...)
                self.stats.connect_failures += 1
                log.debug("connect %s attempt %d failed: %s", self.id, attempt, exc)
                if attempt == self.options.connect_attempts or self.stop.is_set():
                    self.record.failed = f"connect failed: {exc}"
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._client.publish(self.status_topic, b"online", qos=1, retain=True)
            return True
        return False

    async def drain(self, seconds: float) -> None:
        """Wait up to ``seconds`` for every in-flight QoS 1 publish to be acknowledged."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._tracker.wait_empty(), seconds)

    async def drop(self) -> None:
        """Drain, then disconnect so the broker publishes the Will (``offline``)."""
        assert self._client is not None
        await self.drain(self.options.drain_timeout_s)
        await self._client.disconnect(reason_code=DISCONNECT_WITH_WILL)

    async def close(self) -> None:
        """The normal end: drain, publish a retained ``offline`` ourselves, disconnect."""
        assert self._client is not None
        await self.drain(self.options.drain_timeout_s)
        self._client.publish(self.status_topic, b"offline", qos=1, retain=True)
        await self.drain(min(2.0, self.options.drain_timeout_s))
        await self._client.disconnect()

    def publish(self, out: Outgoing) -> None:
        """Publish one message, recording its injections and (QoS 1) awaiting its ack."""
        assert self._client is not None
        if out.seq is not None:
            tag = out.seq
        elif out.event_seq is not None:
            tag = EVENT_TAG_BASE + out.event_seq
        else:
            tag = self._next_malformed_tag
            self._next_malformed_tag -= 1
        for kind, item in out.injections:
            self.record.injections[kind].append(item)
            if kind == "malformed":
                item["acked"] = out.qos == 1
                if out.qos == 1:
                    self._malformed_pending[tag] = item
        if out.qos == 1:
            self._unacked.add(tag)
            self.stats.awaiting_ack += 1
            self._tracker.tag = tag
        try:
            self._client.publish(out.topic, out.payload, qos=out.qos)
        except Exception as exc:  # noqa: BLE001 (e.g. OverflowError: in-flight window full)
            self.stats.errors += 1
            log.debug("publish %s failed: %s", self.id, exc)
        finally:
            self._tracker.tag = None
        if out.seq is not None:
            self.record.sent = out.seq
            self.stats.telemetry += 1
        elif out.event_seq is not None:
            self.record.events_sent = out.event_seq
            kind = out.event_type or "?"
            self.record.event_types[kind] = self.record.event_types.get(kind, 0) + 1
            self.stats.events += 1
        else:
            self.stats.malformed += 1
        self.stats.published += 1
        now = time.time()
        if self.stats.first_publish is None:
            self.stats.first_publish = now
        self.stats.last_publish = now

    def settle_acks(self) -> None:
        """At the end: record the unacknowledged seqs; unacked malformed input is not acked."""
        self.record.unacked = sorted(t for t in self._unacked if 0 < t < EVENT_TAG_BASE)
        self.record.events_unacked = sorted(
            t - EVENT_TAG_BASE for t in self._unacked if t > EVENT_TAG_BASE
        )
        for tag in self._unacked:
            if tag < 0 and tag in self._malformed_pending:
                self._malformed_pending[tag]["acked"] = False
