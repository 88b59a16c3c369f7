"""Minimal asyncio MQTT 5 subscriber with manual, batched, in-order acknowledgements.

One persistent session (clean start off, long session expiry, stable client id); subscriptions
renewed after every CONNACK; reconnect with exponential backoff; keepalive pings. Inbound
PUBLISH packets are decoded in ``data_received`` and handed to a :class:`PublishSink`; the sink
later calls :meth:`Subscriber.send_acks` with the packet ids to acknowledge (one socket write).
Acks for a previous connection are never sent on a new one: Mosquitto redelivers those
messages itself (at-least-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

import mqtt_codec as codec
from bridge.errors import BridgeError

log = logging.getLogger(__name__)

_TOPIC_CACHE_MAX = 200_000  # decoded topic names kept (one per device channel)


class MqttConnectRefusedError(BridgeError):
    """Mosquitto refused the CONNECT for a reason retrying cannot fix (credentials, ACL)."""


class PublishSink(Protocol):
    def on_publish(self, topic: str, payload: bytes, qos: int, packet_id: int, dup: bool) -> None:
        """Called on the event loop for each inbound PUBLISH, in arrival order."""

    def on_read_done(self) -> None:
        """Called after the PUBLISH packets of one socket read (or of a resume) were handed."""

    def on_connection_change(self, generation: int, connected: bool) -> None:
        """Called when a connection is ready (subscribed) or lost."""


class _Connection(asyncio.Protocol):
    """One TCP connection to the broker."""

    def __init__(self, owner: Subscriber) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.connack: asyncio.Future[codec.Connack] = owner.loop.create_future()
        self.suback: asyncio.Future[list[int]] = owner.loop.create_future()
        self.closed: asyncio.Future[None] = owner.loop.create_future()
        self.last_in = time.monotonic()
        self.last_out = time.monotonic()
        self.paused = False
        self.server_reason = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.warning("MQTT connection lost: %s", exc)
        for fut in (self.connack, self.suback):
            if not fut.done():
                fut.set_exception(ConnectionError("connection closed"))
                fut.exception()  # retrieved: nobody may be waiting any more
        if not self.closed.done():
            self.closed.set_result(None)

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)
            self.last_out = time.monotonic()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.last_in = time.monotonic()
        if self.buf:
            self.buf += data
            self._process()
        else:  # the common case: no partial packet left from the last read, decode in place
            self._process(data)

    def _process(self, data: bytes | None = None) -> None:
        """Decode the complete packets in ``data`` (else ``buf``); stop early while paused
        (back-pressure); what is left waits in ``buf``. Works on immutable bytes so that each
        topic and payload is one slice (a memoryview slice of a bytearray costs two objects)."""
        if data is None:
            view = bytes(self.buf)
            self.buf.clear()
        else:
            view = data
        size = len(view)
        pos = 0
        sink = self.owner.sink
        topics = self.owner.topic_cache
        try:
            while size - pos >= 2 and not self.paused:
                first = view[pos]
                length = view[pos + 1]
                start = pos + 2
                if length & 0x80:
                    if size - pos > 2 and not view[pos + 2] & 0x80:  # 2-byte length (< 16 KiB)
                        length = (length & 0x7F) | (view[pos + 2] << 7)
                        start = pos + 3
                    else:
                        decoded = codec.decode_varint(view, pos + 1)
                        if decoded is None:
                            break
                        length, start = decoded
                end = start + length
                if end > size:
                    break
                pos = end
                if first >> 4 == codec.PUBLISH:
                    qos = (first >> 1) & 0x03
                    i = start + 2 + ((view[start] << 8) | view[start + 1])
                    raw_topic = view[start + 2 : i]
                    topic = topics.get(raw_topic)
                    if topic is None:
                        topic = raw_topic.decode("utf-8", "replace")
                        if len(topics) < _TOPIC_CACHE_MAX:
                            topics[raw_topic] = topic
                    mid = 0
                    if qos:
                        if qos != 1:
                            raise codec.MqttProtocolError(f"unexpected QoS {qos} PUBLISH")
                        mid = (view[i] << 8) | view[i + 1]
                        i += 2
                    plen = view[i]
                    if plen < 0x80:
                        i += 1 + plen
                    else:
                        decoded = codec.decode_varint(view, i)
                        if decoded is None:
                            raise codec.MqttProtocolError("malformed PUBLISH properties")
                        i = decoded[1] + decoded[0]
                    sink.on_publish(topic, view[i:end], qos, mid, bool(first & 0x08))
                else:
                    self._control(first >> 4, view[start:end])
        except (codec.MqttProtocolError, IndexError) as exc:
            log.error("MQTT protocol error, dropping the connection: %s", exc)
            self.owner.errors["protocol"] = self.owner.errors.get("protocol", 0) + 1
            self.buf.clear()
            self.close()
            return
        finally:
            sink.on_read_done()
        if pos < size:
            self.buf += view[pos:] if pos else view

    def _control(self, kind: int, body: bytes) -> None:
        if kind == codec.PINGRESP:
            return
        if kind == codec.CONNACK:
            if not self.connack.done():
                self.connack.set_result(codec.decode_connack(body))
        elif kind == codec.SUBACK:
            if not self.suback.done():
                self.suback.set_result(codec.decode_suback(body)[1])
        elif kind == codec.DISCONNECT:
            self.server_reason = codec.decode_disconnect_reason(body)
            log.warning(
                "Mosquitto sent DISCONNECT: %s (0x%02x)",
                codec.DISCONNECT_REASONS.get(self.server_reason, "reason"),
                self.server_reason,
            )
            self.close()
        else:
            raise codec.MqttProtocolError(f"unexpected packet type {kind}")

    def pause(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None:
            self.paused = False
            self.last_in = time.monotonic()
            self._process()  # what was read before the pause comes first
            if not self.paused and not self.transport.is_closing():
                self.transport.resume_reading()


class Subscriber:
    """Keeps one MQTT session alive and feeds inbound PUBLISH packets to a sink."""

    def __init__(
        self,
        sink: PublishSink,
        *,
        host: str,
        port: int,
        client_id: str,
        filters: tuple[str, ...],
        keepalive: int,
        session_expiry: int,
        receive_maximum: int,
        username: str = "",
        password: str = "",
        reconnect_min_s: float = 0.5,
        reconnect_max_s: float = 30.0,
    ) -> None:
        self.sink = sink
        self.host = host
        self.port = port
        self.client_id = client_id
        self.filters = filters
        self.keepalive = keepalive
        self.session_expiry = session_expiry
        self.receive_maximum = receive_maximum
        self.username = username
        self.password = password
        self.reconnect_min_s = reconnect_min_s
        self.reconnect_max_s = reconnect_max_s
        self.generation = 0
        self.connected = False
        self.connects = 0
        self.errors: dict[str, int] = {}
        self.topic_cache: dict[bytes, str] = {}
        self._conn: _Connection | None = None
        self._stopping = False
        self._want_paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    # --- used by the sink (event loop thread) ------------------------------------------------

    def send_acks(self, generation: int, packet_ids: list[int]) -> bool:
        """PUBACK ``packet_ids`` (in order, one write) if ``generation`` is still connected."""
        conn = self._conn
        if conn is None or generation != self.generation or not self.connected:
            return False
        conn.write(codec.encode_pubacks(packet_ids))
        return True

    def pause_reading(self) -> None:
        self._want_paused = True
        if self._conn is not None:
            self._conn.pause()

    def resume_reading(self) -> None:
        self._want_paused = False
        if self._conn is not None:
            self._conn.resume()

    def drop_connection(self, why: str) -> None:
        """Close the connection so Mosquitto redelivers everything unacknowledged."""
        if self._conn is not None:
            log.warning("dropping the MQTT connection: %s", why)
            self._conn.close()

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, subscribe, and reconnect with backoff until :meth:`stop`.

        Raises :class:`MqttConnectRefusedError` on a permanent CONNACK refusal.
        """
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        delay = self.reconnect_min_s
        while not self._stopping:
            try:
                await self._session()
                delay = self.reconnect_min_s
            except MqttConnectRefusedError:
                raise
            except (OSError, ConnectionError, TimeoutError, codec.MqttProtocolError) as exc:
                self.errors["connect"] = self.errors.get("connect", 0) + 1
                log.warning(
                    "MQTT %s:%s unavailable (%s); retrying in %.1f s",
                    self.host,
                    self.port,
                    str(exc) or type(exc).__name__,
                    delay,
                )
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            delay = min(delay * 2, self.reconnect_max_s)

    async def _session(self) -> None:
        loop = self.loop
        transport, conn = await asyncio.wait_for(
            loop.create_connection(lambda: _Connection(self), self.host, self.port), 10
        )
        del transport
        self._conn = conn
        keeper: asyncio.Task[None] | None = None
        try:
            conn.write(
                codec.encode_connect(
                    self.client_id,
                    keepalive=self.keepalive,
                    clean_start=False,
                    session_expiry=self.session_expiry,
                    receive_maximum=self.receive_maximum,
                    username=self.username,
                    password=self.password,
                )
            )
            connack = await asyncio.wait_for(asyncio.shield(conn.connack), 10)
            if connack.reason != 0:
                text = f"Mosquitto refused the connection: {connack.reason_text}"
                if connack.reason in codec.PERMANENT_CONNACK_REASONS:
                    raise MqttConnectRefusedError(text)
                raise ConnectionError(text)
            self.generation += 1
            # retain handling 1: retained status messages only for a new subscription, not
            # again on every reconnect of the persistent session
            conn.write(codec.encode_subscribe(1, self.filters, qos=1, retain_handling=1))
            reasons = await asyncio.wait_for(asyncio.shield(conn.suback), 10)
            bad = [(f, r) for f, r in zip(self.filters, reasons, strict=False) if r >= 0x80]
            if bad or len(reasons) != len(self.filters):
                raise MqttConnectRefusedError(f"subscription refused: {bad or reasons}")
            self.connects += 1
            self.connected = True
            log.info(
                "MQTT connected to %s:%s as %r (session present: %s), subscribed to %s",
                self.host,
                self.port,
                self.client_id,
                connack.session_present,
                ", ".join(self.filters),
            )
            if self._want_paused:
                conn.pause()
            self.sink.on_connection_change(self.generation, True)
            if self.keepalive:
                keeper = asyncio.create_task(self._keep_alive(conn))
            await asyncio.shield(conn.closed)
            if not self._stopping:
                self.errors["disconnect"] = self.errors.get("disconnect", 0) + 1
                log.warning("MQTT connection closed; reconnecting")
        finally:
            if keeper is not None:
                keeper.cancel()
            was_connected = self.connected
            self.connected = False
            self._conn = None
            conn.close()
            if was_connected:
                self.sink.on_connection_change(self.generation, False)

    async def _keep_alive(self, conn: _Connection) -> None:
        period = max(self.keepalive / 4, 0.5)
        while not conn.closed.done():
            await asyncio.sleep(period)
            now = time.monotonic()
            if now - conn.last_out >= self.keepalive * 0.5:
                conn.write(codec.PINGREQ_PACKET)
            if not conn.paused and now - conn.last_in > self.keepalive * 1.5:
                log.warning(
                    "no traffic from Mosquitto for %.0f s; reconnecting", now - conn.last_in
                )
                conn.close()
                return

    async def stop(self) -> None:
        """Disconnect normally (the session and its queued messages stay on the broker)."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        conn = self._conn
        if conn is not None:
            conn.write(codec.DISCONNECT_NORMAL)
            conn.close()
            try:
                await asyncio.wait_for(asyncio.shield(conn.closed), 5)
            except TimeoutError:
                log.warning("MQTT connection did not close within 5 s")
