"""The command path's MQTT 5 connection: one blocking socket driven by the command worker.

Why not paho: the worker publishes up to a thousand commands a second and acknowledges as many
replies. paho built a ``Properties`` object per publish and made one ``send()`` per packet,
~0.3 ms of Python per command, and under telemetry load that CPU was the round trip's tail.
Here a step's publishes and PUBACKs are queued and written with one ``send()``, everything that
arrived is read with one ``recv()``, and the packets are the few struct calls of
:mod:`mqtt_codec`.

Session rules (MQTT 5.0 4.4): clean start off and a session expiry, so replies published while
the worker is away wait in Mosquitto; after a reconnect every unacknowledged command PUBLISH is
sent again with DUP set and the same packet id; PUBACKs owed on a lost connection are not sent
on the next one (Mosquitto redelivers those replies itself).
"""

from __future__ import annotations

import logging
import select
import socket
import time
from dataclasses import dataclass
from typing import NoReturn

import mqtt_codec as codec
from commands.model import CommandPathError

__all__ = ["CommandLink", "Connected", "Incoming", "LinkEvent", "LinkLostError", "Puback"]

log = logging.getLogger(__name__)

_RECV_BYTES = 1 << 18
_IO_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Puback:
    mid: int
    reason: int


@dataclass(frozen=True, slots=True)
class Incoming:
    mid: int
    qos: int
    topic: str
    payload: bytes
    generation: int


@dataclass(frozen=True, slots=True)
class Connected:
    session_present: bool
    receive_maximum: int
    generation: int
    resent: int
    link: int = 0  # which connection of a pool (0: the one that receives replies)


LinkEvent = Puback | Incoming | Connected


class LinkLostError(Exception):
    """The connection broke (or never came up); the caller reconnects with backoff."""


class CommandLink:
    """Publishes commands and receives replies on one MQTT 5 session. Not thread-safe."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        client_id: str,
        subscription: str | tuple[str, ...] | None,
        keepalive: int,
        session_expiry: int,
        receive_maximum: int,
        username: str = "",
        password: str = "",
        clean_start: bool = False,
        index: int = 0,
    ) -> None:
        self.host = host
        self.clean_start = clean_start
        self.index = index
        self.port = port
        self.client_id = client_id
        self.subscription = (subscription,) if isinstance(subscription, str) else subscription
        self.keepalive = keepalive
        self.session_expiry = session_expiry
        self.receive_maximum = receive_maximum
        self.username = username
        self.password = password
        self.generation = 0
        self._sock: socket.socket | None = None
        self._out = bytearray()
        self._in = bytearray()
        self._next_mid = 0
        # packet id -> the encoded PUBLISH, until its PUBACK: resent after a reconnect
        self._unacked: dict[int, bytes] = {}
        self._last_in = 0.0
        self._last_out = 0.0

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def inflight(self) -> int:
        """Command publishes not yet acknowledged by Mosquitto."""
        return len(self._unacked)

    # -- connection ---------------------------------------------------------------------

    def connect(self, timeout: float = _IO_TIMEOUT_S) -> list[LinkEvent]:
        """Connect, subscribe and resend what was unacknowledged. Returns the ``Connected``
        event followed by any PUBLISH that arrived before the SUBACK.

        Raises :class:`CommandPathError` when Mosquitto refuses for a reason retrying cannot
        fix, :class:`LinkLostError` (or ``OSError``) when it is unreachable.
        """
        self.close(disconnect=False)
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        # a new number per attempt: PUBLISHes read from here on belong to this connection
        self.generation += 1
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(
                codec.encode_connect(
                    self.client_id,
                    keepalive=self.keepalive,
                    clean_start=self.clean_start,
                    session_expiry=self.session_expiry,
                    receive_maximum=self.receive_maximum,
                    username=self.username,
                    password=self.password,
                )
            )
            deadline = time.monotonic() + timeout
            early: list[LinkEvent] = []
            connack = self._await(sock, codec.CONNACK, deadline, early)
            ack = codec.decode_connack(connack)
            if ack.reason != 0:
                text = f"Mosquitto refused the command path's connection: {ack.reason_text}"
                if ack.reason in codec.PERMANENT_CONNACK_REASONS:
                    raise CommandPathError(text)
                raise LinkLostError(text)
            if self.subscription is not None:
                sock.sendall(codec.encode_subscribe(1, self.subscription, qos=1))
                suback = self._await(sock, codec.SUBACK, deadline, early)
                reasons = codec.decode_suback(suback)[1]
                if len(reasons) != len(self.subscription) or any(r >= 0x80 for r in reasons):
                    raise CommandPathError(
                        f"subscription to {self.subscription!r} refused: {reasons}"
                    )
        except BaseException:
            sock.close()
            self._in.clear()
            raise
        sock.settimeout(_IO_TIMEOUT_S)
        self._sock = sock
        self._last_in = self._last_out = time.monotonic()
        self._out.clear()
        for packet in self._unacked.values():
            self._out += codec.set_dup(packet)
        connected = Connected(
            ack.session_present,
            ack.receive_maximum,
            self.generation,
            len(self._unacked),
            self.index,
        )
        return [connected, *early]

    def _await(
        self, sock: socket.socket, kind: int, deadline: float, early: list[LinkEvent]
    ) -> bytes:
        """Read until a packet of ``kind`` arrives; keep other packets' events in ``early``."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LinkLostError(f"no reply from Mosquitto (waiting for packet type {kind})")
            sock.settimeout(left)
            data = sock.recv(_RECV_BYTES)
            if not data:
                raise LinkLostError("Mosquitto closed the connection")
            self._in += data
            packets, used = codec.split_packets(self._in)
            del self._in[:used]
            found: bytes | None = None
            for first, body in packets:
                if found is None and first >> 4 == kind:
                    found = body
                else:
                    event = self._decode(first, body)
                    if event is not None:
                        early.append(event)
            if found is not None:
                return found

    def close(self, *, disconnect: bool = True) -> None:
        """Close the socket; with ``disconnect``, write what is queued and a normal DISCONNECT
        first (without, as a crash would: Mosquitto keeps the session and redelivers)."""
        sock = self._sock
        self._sock = None
        out = bytes(self._out)
        self._out.clear()
        self._in.clear()
        if sock is None:
            return
        try:
            if disconnect:
                sock.settimeout(1.0)
                sock.sendall(out + codec.DISCONNECT_NORMAL)
        except OSError:
            pass
        finally:
            sock.close()

    # -- traffic ------------------------------------------------------------------------

    def publish(self, topic: str, payload: bytes, properties: bytes) -> int:
        """Queue a QoS 1 PUBLISH; returns its packet id. Written by the next :meth:`flush`
        (or, while disconnected, resent after the reconnect)."""
        mid = self._next_mid
        while True:
            mid = mid % 65535 + 1
            if mid not in self._unacked:
                break
        self._next_mid = mid
        packet = codec.encode_publish(topic, payload, 1, mid, properties=properties)
        self._unacked[mid] = packet
        if self._sock is not None:
            self._out += packet
        return mid

    def ack(self, mids: list[int], generation: int) -> None:
        """Queue PUBACKs for replies received on connection ``generation``."""
        if self._sock is not None and generation == self.generation and mids:
            self._out += codec.encode_pubacks(mids)

    def flush(self) -> None:
        """Write everything queued with one send."""
        sock = self._sock
        if sock is None or not self._out:
            return
        try:
            sock.sendall(self._out)
        except OSError as exc:
            self._lost(f"write failed: {exc}")
        self._out.clear()
        self._last_out = time.monotonic()

    def fileno(self) -> int:
        """The socket's descriptor (-1 while disconnected)."""
        return self._sock.fileno() if self._sock is not None else -1

    def poll(self, timeout: float) -> list[LinkEvent]:
        """Flush, wait up to ``timeout`` for Mosquitto, return what arrived.

        Raises :class:`LinkLostError` when the connection is gone.
        """
        sock = self._sock
        if sock is None:
            raise LinkLostError("not connected")
        self.flush()
        ready, _, _ = select.select((sock,), (), (), timeout)
        events = self.read() if ready else []
        self.keep_alive(time.monotonic())
        return events

    def read(self) -> list[LinkEvent]:
        """Read what the socket holds (it was reported readable) and decode it."""
        sock = self._sock
        if sock is None:
            raise LinkLostError("not connected")
        try:
            data = sock.recv(_RECV_BYTES)
        except OSError as exc:
            self._lost(f"read failed: {exc}")
        if not data:
            self._lost("Mosquitto closed the connection")
        self._last_in = time.monotonic()
        self._in += data
        packets, used = codec.split_packets(self._in)
        del self._in[:used]
        events: list[LinkEvent] = []
        try:
            for first, body in packets:
                event = self._decode(first, body)
                if event is not None:
                    events.append(event)
        except (codec.MqttProtocolError, IndexError) as exc:
            # what was decoded before stays unacknowledged: Mosquitto sends it again
            self._lost(f"protocol error: {exc}")
        return events

    def keep_alive(self, now: float) -> None:
        """Ping when idle; drop the connection when Mosquitto went silent."""
        if not self.keepalive or self._sock is None:
            return
        if now - self._last_in > self.keepalive * 1.5:
            self._lost(f"no traffic from Mosquitto for {now - self._last_in:.0f} s")
        if now - self._last_out >= self.keepalive * 0.5:
            self._out += codec.PINGREQ_PACKET
            self.flush()

    def _decode(self, first: int, body: bytes) -> LinkEvent | None:
        kind = first >> 4
        if kind == codec.PUBACK:
            mid, reason = codec.decode_puback(body)
            if self._unacked.pop(mid, None) is None:
                return None  # a PUBACK for a publish of an earlier life: nothing waits for it
            return Puback(mid, reason)
        if kind == codec.PUBLISH:
            pub = codec.decode_publish(first, body)
            return Incoming(pub.packet_id, pub.qos, pub.topic, pub.payload, self.generation)
        if kind == codec.DISCONNECT:
            reason = codec.decode_disconnect_reason(body)
            self._lost(
                f"Mosquitto sent DISCONNECT: "
                f"{codec.DISCONNECT_REASONS.get(reason, 'reason')} (0x{reason:02x})"
            )
        if kind in (codec.PINGRESP, codec.SUBACK, codec.CONNACK):
            return None
        raise codec.MqttProtocolError(f"unexpected packet type {kind}")

    def _lost(self, why: str) -> NoReturn:
        self.close(disconnect=False)
        raise LinkLostError(why)
