"""MQTT sessions acting for HTTP devices: one persistent MQTT 5 session per device, opened on
demand by iot-api with its service account (role ``api``: it may subscribe to devices'
commands and publish their replies, registry.acl).

Why a session per device (docs/api.md "Commands to HTTP devices"): the command path publishes
a command to the device's MQTT topic, QoS 1, and counts on Mosquitto to keep it for a device
that is not there (``delivered`` = a connected device or a persistent session has it). A
session per device keeps exactly that: commands sent while no HTTP request waits stay queued
in Mosquitto (clean start off, session expiry ``device_session_expiry_s``), and one device's
unacknowledged commands never block another's. A command read from Mosquitto is acknowledged
(PUBACK) only once an HTTP answer carrying it was written; one the client did not take is kept
for the next request, and one held when the connection closes is sent again by Mosquitto on the
next connect (MQTT 5 4.4). Nothing is lost, a command may come twice (devices de-duplicate by
command id, as on MQTT).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass

import mqtt_codec as codec
from api.http_devices.model import DeviceRef, HttpCommand, command_filters, command_of

log = logging.getLogger(__name__)
_IO_TIMEOUT_S = 10.0


class DeviceLinkError(Exception):
    """Mosquitto refused the session, a subscription or a publish, or the connection broke."""


@dataclass(frozen=True, slots=True)
class Held:
    """A command read from Mosquitto and not yet acknowledged (the PUBACK owes it)."""

    packet_id: int
    generation: int
    command: HttpCommand


@dataclass(frozen=True, slots=True)
class MqttSettings:
    host: str
    port: int
    username: str
    password: str
    session_expiry_s: int
    keepalive_s: int = 30
    client_prefix: str = "iot-api"  # client id = prefix/user name (iot-amqp: "iot-amqp")


class DeviceLink:
    """One device's MQTT connection (its persistent session)."""

    def __init__(self, settings: MqttSettings, ref: DeviceRef, groups: tuple[str, ...]) -> None:
        self.settings = settings
        self.ref = ref
        self.groups = groups
        self.client_id = f"{settings.client_prefix}/{ref.username}"
        self.generation = 0
        self.held: deque[Held] = deque()
        self.waiters = 0
        self.last_used = time.monotonic()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._acks: dict[int, asyncio.Future[int]] = {}
        self._next_id = 0
        self._connack: asyncio.Future[codec.Connack] | None = None
        self._suback: asyncio.Future[list[int]] | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        """Open the session: CONNECT (clean start off), subscribe the device's command filters."""
        s = self.settings
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(s.host, s.port), _IO_TIMEOUT_S
        )
        self._reader, self._writer = reader, writer
        self.generation += 1
        loop = asyncio.get_running_loop()
        self._connack = loop.create_future()
        self._suback = loop.create_future()
        self._tasks = [asyncio.create_task(self._read(self.generation))]
        writer.write(
            codec.encode_connect(
                self.client_id,
                keepalive=s.keepalive_s,
                clean_start=False,
                session_expiry=s.session_expiry_s,
                receive_maximum=100,
                username=s.username,
                password=s.password,
            )
        )
        try:
            connack = await asyncio.wait_for(self._connack, _IO_TIMEOUT_S)
            if connack.reason:
                raise DeviceLinkError(f"Mosquitto refused the session: {connack.reason_text}")
            writer.write(
                codec.encode_subscribe(self._packet_id(), command_filters(self.ref, self.groups))
            )
            granted = await asyncio.wait_for(self._suback, _IO_TIMEOUT_S)
            if any(code >= 0x80 for code in granted):
                raise DeviceLinkError(f"subscription refused: reason codes {granted}")
        except (TimeoutError, ConnectionError) as exc:
            self.close()
            raise DeviceLinkError(f"MQTT session for {self.ref.username}: {exc!r}") from exc
        except DeviceLinkError:
            self.close()
            raise
        self._tasks.append(asyncio.create_task(self._keep_alive(self.generation)))
        log.info("MQTT session for HTTP device %s open", self.ref.username)

    def _packet_id(self) -> int:
        self._next_id = self._next_id % 65535 + 1
        return self._next_id

    async def _read(self, generation: int) -> None:
        stream = codec.StreamReader()
        reader = self._reader
        assert reader is not None
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for pkt in stream.feed(data):
                    self._on_packet(pkt, generation)
        except (ConnectionError, codec.MqttProtocolError) as exc:
            log.warning("MQTT session for %s lost: %s", self.ref.username, exc)
        finally:
            if generation == self.generation:
                self._lost()

    def _on_packet(self, pkt: codec.Packet, generation: int) -> None:
        if pkt.kind == codec.PUBLISH:
            pub = codec.parse_publish((codec.PUBLISH << 4) | pkt.flags, pkt.body)
            users = [v for v in pub.properties.get(codec.USER_PROPERTY, ()) if isinstance(v, tuple)]
            corr = pub.first(codec.CORRELATION_DATA)
            command = command_of(
                pub.topic, pub.payload, users, corr if isinstance(corr, bytes) else None
            )
            if command is None:  # nothing a device could act on: acknowledged and dropped
                log.warning("%s: not a command on %s; dropped", self.ref.username, pub.topic)
                if pub.qos:
                    self._write(codec.encode_puback(pub.packet_id))
                return
            if pub.qos == 0:  # never kept by Mosquitto: hand it on as it is
                self.held.append(Held(0, generation, command))
            else:
                self.held.append(Held(pub.packet_id, generation, command))
            self._wake.set()
        elif pkt.kind == codec.PUBACK:
            mid, reason = codec.decode_puback(pkt.body)
            fut = self._acks.pop(mid, None)
            if fut is not None and not fut.done():
                fut.set_result(reason)
        elif pkt.kind == codec.CONNACK and self._connack is not None:
            if not self._connack.done():
                self._connack.set_result(codec.decode_connack(pkt.body))
        elif pkt.kind == codec.SUBACK and self._suback is not None:
            if not self._suback.done():
                self._suback.set_result(codec.decode_suback(pkt.body)[1])
        elif pkt.kind == codec.DISCONNECT:
            log.warning(
                "Mosquitto closed the session of %s: %s",
                self.ref.username,
                codec.DISCONNECT_REASONS.get(codec.decode_disconnect_reason(pkt.body), "?"),
            )

    async def _keep_alive(self, generation: int) -> None:
        while generation == self.generation and self.connected:
            await asyncio.sleep(self.settings.keepalive_s / 2)
            self._write(codec.PINGREQ_PACKET)

    def _write(self, data: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)

    def _lost(self) -> None:
        """The connection ended: what it held is Mosquitto's to send again (never acked on a
        later connection), publishes waiting for a PUBACK fail."""
        self.held.clear()
        for fut in self._acks.values():
            if not fut.done():
                fut.set_exception(DeviceLinkError("MQTT connection lost"))
        self._acks.clear()
        for waiting in (self._connack, self._suback):
            if waiting is not None and not waiting.done():
                waiting.set_exception(ConnectionError("MQTT connection lost"))
                waiting.exception()
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._wake.set()

    async def take(self, timeout_s: float) -> Held | None:
        """The oldest command held, waiting up to ``timeout_s`` for one; None if none came
        (or the connection ended)."""
        deadline = time.monotonic() + timeout_s
        while not self.held:
            left = deadline - time.monotonic()
            if left <= 0 or not self.connected:
                return None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), left)
        return self.held.popleft()

    def give_back(self, held: Held) -> None:
        """Not written to the client: the next request gets it first (if still this connection)."""
        if held.generation == self.generation and self.connected:
            self.held.appendleft(held)
            self._wake.set()

    def ack(self, held: Held) -> None:
        """Written to the client: Mosquitto may forget it. Only on its own connection."""
        if held.packet_id and held.generation == self.generation:
            self._write(codec.encode_puback(held.packet_id))

    async def publish(self, topic: str, payload: bytes) -> int:
        """QoS 1 publish; the PUBACK's reason code once Mosquitto answered."""
        if not self.connected:
            raise DeviceLinkError("MQTT session not connected")
        mid = self._packet_id()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._acks[mid] = fut
        self._write(codec.encode_publish(topic, payload, 1, mid))
        try:
            return await asyncio.wait_for(fut, _IO_TIMEOUT_S)
        except TimeoutError as exc:
            self._acks.pop(mid, None)
            raise DeviceLinkError("no PUBACK from Mosquitto in time") from exc

    def close(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._write(bytes((codec.DISCONNECT << 4, 0)))
        self.generation += 1  # nothing held is acknowledged any more
        self._lost()
        for task in self._tasks:
            task.cancel()
        self._tasks = []


class DeviceLinks:
    """The devices' sessions of this instance: opened on a device's request, closed after
    ``idle_s`` without one (the session itself stays in Mosquitto)."""

    def __init__(self, settings: MqttSettings, idle_s: float) -> None:
        self.settings = settings
        self.idle_s = idle_s
        self._links: dict[DeviceRef, DeviceLink] = {}
        self._locks: dict[DeviceRef, asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return sum(1 for link in self._links.values() if link.connected)

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep())

    async def get(self, ref: DeviceRef, groups: tuple[str, ...]) -> DeviceLink:
        """The device's connected session (opened now if needed)."""
        lock = self._locks.setdefault(ref, asyncio.Lock())
        async with lock:
            link = self._links.get(ref)
            if link is not None and link.connected and link.groups == groups:
                link.last_used = time.monotonic()
                return link
            if link is not None:  # gone, or its groups changed: a new connection subscribes
                link.close()
            link = DeviceLink(self.settings, ref, groups)
            await link.connect()
            self._links[ref] = link
            return link

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self.idle_s))
            now = time.monotonic()
            for ref, link in list(self._links.items()):
                if not link.waiters and now - link.last_used > self.idle_s:
                    link.close()
                    del self._links[ref]

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for link in self._links.values():
            link.close()
        self._links.clear()
