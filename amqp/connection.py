"""One AMQP client connection (service): SASL in Python (amqp.sasl, amqp.login), then proton's
engine (amqp.engine) for the frames; the device's uploads go to Kafka (amqp.uploads).

The stream is read on this task; proton events are handled right after each read. Kafka's
answers arrive on the event loop later (amqp.uploads) and write their dispositions at once.
Malformed input ends only this connection: proton answers a framing or decode error with a
close frame, and the socket is closed after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from proton import (
    Condition,
    Connection,
    Delivery,
    Endpoint,
    Event,
    Link,
    Session,
    SymbolList,
    symbol,
)

from amqp import sasl
from amqp.command_model import check_command_settle_modes, command_device
from amqp.engine import Engine, condition_of, delivery_of, link_of
from amqp.errors import SaslError
from amqp.login import Login, Verdict
from amqp.model import Cond, Refusal, check_receiver_attach, check_upload_attach
from amqp.tls import PeerCert
from api.http_devices.model import DeviceRef

if TYPE_CHECKING:
    from amqp.service import Door

log = logging.getLogger(__name__)
_READ = 65536
_SASL_TIMEOUT_S = 30.0
_SYS_TEMP = 4  # sasl-outcome sys-temp
_TLS_CLOSE_S = 1.0
# the proton events handled in _events (the others are not even wrapped: amqp.engine)
_HANDLED = frozenset(
    t.number
    for t in (
        Event.CONNECTION_REMOTE_OPEN, Event.SESSION_REMOTE_OPEN, Event.LINK_REMOTE_OPEN,
        Event.DELIVERY, Event.LINK_FLOW, Event.LINK_REMOTE_CLOSE, Event.SESSION_REMOTE_CLOSE,
        Event.CONNECTION_REMOTE_CLOSE,
    )
)  # fmt: skip
_DELIVERY = Event.DELIVERY.number
_LINK_FLOW = Event.LINK_FLOW.number


class ClientConnection:
    def __init__(
        self,
        door: Door,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        cert: PeerCert | None = None,
    ) -> None:
        self.door = door
        self.cert = cert  # the TLS client certificate (amqps), verified by the handshake
        self.reader = reader
        self.writer = writer
        self.login = Login(Verdict.REFUSED)
        self.engine: Engine | None = None
        self.closed = False
        self._closing = False
        self._flush_due = False  # a deferred write is scheduled (flush_soon)

    # --- SASL -------------------------------------------------------------------------------

    async def _sasl(self) -> bytes | None:
        """Read the protocol header and do SASL; the bytes read past it (the AMQP header on),
        or None when the connection is to end."""
        head = await self.reader.readexactly(sasl.HEADER_SIZE)
        logins = self.door.logins
        if head == sasl.AMQP_HEADER and "ANONYMOUS" in logins.mechanisms:
            self.login = Login(Verdict.OK)  # no SASL at all: only in the insecure mode
            return head
        self.writer.write(sasl.SASL_HEADER)
        if head != sasl.SASL_HEADER:  # a client skipping SASL: tell it what we speak, end
            await self.writer.drain()
            return None
        self.writer.write(sasl.mechanisms_frame(logins.offered(self.cert)))
        buffer = b""
        while True:
            body, used = sasl.take_frame(buffer)
            if body is not None:
                break
            chunk = await self.reader.read(_READ)
            if not chunk:
                return None
            buffer += chunk
        init = sasl.parse_init(body)
        self.login = await logins.check(init.mechanism, init.response, self.cert)
        self.door.stats.logins.labels(self.login.verdict.value).inc()
        if self.login.verdict is Verdict.REFUSED:
            log.info("log-in refused: %s", self._who(init))
        code = {Verdict.OK: sasl.OK, Verdict.UNAVAILABLE: _SYS_TEMP}.get(
            self.login.verdict, sasl.AUTH
        )
        self.writer.write(sasl.outcome_frame(code))
        await self.writer.drain()
        return buffer[used:] if code == sasl.OK else None

    def _who(self, init: sasl.SaslInit) -> str:
        """One log line's account of a refused log-in (never a secret)."""
        if init.mechanism == "EXTERNAL" and self.cert is not None:
            c = self.cert
            return (
                f"EXTERNAL, certificate CN={c.common_name!r} O={c.organisation!r} {c.fingerprint}"
            )
        if init.mechanism == "PLAIN":
            user = init.response.split(b"\0")[1:2]
            return f"PLAIN, user {(user[0] if user else b'').decode('utf-8', 'replace')[:100]!r}"
        return f"mechanism {init.mechanism[:40]!r} not offered"

    # --- the connection ---------------------------------------------------------------------

    async def run(self) -> None:
        self.door.stats.connections.inc()
        try:
            try:
                rest = await asyncio.wait_for(self._sasl(), _SASL_TIMEOUT_S)
            except (SaslError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.info("SASL ended: %s", exc)
                rest = None
            if rest is not None:
                await self._serve(rest)
        except (ConnectionError, OSError) as exc:
            log.info("connection ended: %s", exc)
        finally:
            self.closed = True
            self.door.uploads.forget(self)
            self.door.commands.forget(self)
            self.door.north.forget(self)
            self.door.queues.forget(self)
            self.door.topics.forget(self)
            self.door.senders.forget(self)
            self.door.stats.connections.dec()
            self.writer.close()
            try:  # bounded: a TLS peer may never answer the close_notify
                await asyncio.wait_for(self.writer.wait_closed(), _TLS_CLOSE_S)
            except (ConnectionError, OSError, TimeoutError):
                self.writer.transport.abort()

    async def _serve(self, first: bytes) -> None:
        cfg = self.door.cfg
        self.engine = Engine(max_frame_bytes=cfg.max_frame_bytes, idle_timeout_s=cfg.idle_timeout_s)
        data = first
        while True:
            if data:
                self.engine.push(data)
            await self._events()
            if not await self._flush():
                return
            if self.engine.input_closed:  # unreadable input: proton reads no more
                self._framing_error()
                await self._events()
                await self._flush()
                return
            deadline = self.engine.tick(time.monotonic())
            wait = max(0.01, deadline - time.monotonic()) if deadline else None
            try:
                data = await asyncio.wait_for(self.reader.read(_READ), wait)
            except TimeoutError:
                data = b""
                continue
            if not data:
                self.engine.close_input()
                await self._events()
                await self._flush()
                return

    async def _flush(self) -> bool:
        """Write what proton has for the peer; False once its output is closed."""
        assert self.engine is not None
        out = self.engine.output()
        if out is None:
            return False
        if out:
            self.writer.write(out)
            await self.writer.drain()
        return True

    def flush_soon(self) -> None:
        """After a disposition, credit or transfer made outside the read loop: written on the
        loop's next turn, once for everything made meanwhile (a batch of Kafka's answers costs
        one socket write and one flow frame per link, not one per message)."""
        if self._flush_due or self.engine is None or self.closed:
            return
        self._flush_due = True
        asyncio.get_running_loop().call_soon(self._write_now)

    def _write_now(self) -> None:
        self._flush_due = False
        if self.engine is None or self.closed:
            return
        out = self.engine.output()
        if out:
            self.writer.write(out)

    # --- proton events ----------------------------------------------------------------------

    async def _events(self) -> None:
        assert self.engine is not None
        for number, impl in self.engine.raw_events(_HANDLED):
            if number == _DELIVERY:  # the hot ones first, without an Event (amqp.engine)
                dlv = delivery_of(impl)
                if dlv is None:
                    continue
                link = dlv.link  # each property read makes a new wrapper: read once
                if link.is_sender:  # a device settled a command, or an app
                    self._settled(dlv, (id(self), link.name))
                else:
                    await self.door.uploads.on_delivery(self, dlv, link)
                continue
            if number == _LINK_FLOW:
                flowed = link_of(impl)
                if flowed is not None and flowed.is_sender:
                    self.door.commands.on_flow(self, flowed)
                    self.door.north.on_flow(self, flowed)
                    self.door.queues.on_flow(self, flowed)
                    self.door.topics.on_flow(self, flowed)
                continue
            event = Event.wrap(impl)
            kind = event.type
            if kind == Event.CONNECTION_REMOTE_OPEN:
                self._open_connection(self.engine.connection)
            elif kind == Event.SESSION_REMOTE_OPEN and event.session is not None:
                event.session.incoming_capacity = 4 * self.door.cfg.max_message_bytes
                event.session.open()
            elif kind == Event.LINK_REMOTE_OPEN and event.link is not None:
                self._attach(event.link)
            elif kind == Event.LINK_REMOTE_CLOSE and event.link is not None:
                _close(event.link)
                self.door.uploads.forget_link(self, event.link)
                self.door.commands.detached(self, event.link)
                self.door.north.detached(self, event.link)
                self.door.queues.detached(self, event.link)
                self.door.topics.detached(self, event.link)
                self.door.senders.detached(self, event.link)
            elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
                _close(event.session)
            elif kind == Event.CONNECTION_REMOTE_CLOSE:
                _close(self.engine.connection)

    def _settled(self, dlv: Delivery, key: tuple[int, str]) -> None:
        """A client's outcome on a link it receives on: queue, topic, northbound or command
        (``key``: the link's (connection, name) key, which its owner files it under)."""
        door = self.door
        for owner in (door.queues, door.topics, door.north):
            if owner.on_disposition(self, dlv, key):
                return
        door.commands.on_disposition(self, dlv, key)

    def _open_connection(self, conn: Connection) -> None:
        conn.container = "iot-amqp"
        conn.offered_capabilities = SymbolList([symbol("ANONYMOUS-RELAY")])
        conn.open()

    def _attach(self, link: Link) -> None:
        if self.door.queues.attach(self, link):  # queue/{q} (amqp.queue_links)
            return
        if self.door.topics.attach(self, link):  # topic/{name} (amqp.topic_links)
            return
        if self.door.north.attach(self, link):  # an application's (amqp.northbound)
            return
        if link.is_receiver:  # the client sends on it
            target = link.remote_target.address
            refusal = check_upload_attach(target, int(link.remote_rcv_settle_mode))
            if refusal is None:
                link.target.copy(link.remote_target)
                link.source.copy(link.remote_source)
                link.rcv_settle_mode = Link.RCV_FIRST
                link.snd_settle_mode = link.remote_snd_settle_mode
                link.max_message_size = self.door.cfg.max_message_bytes
                link.open()
                link.flow(self.door.cfg.link_credit)
                return
        else:
            source = link.remote_source.address
            device = command_device(self.login.principal, source)
            refusal = device if isinstance(device, Refusal) else None
            if isinstance(device, DeviceRef):
                refusal = check_command_settle_modes(
                    int(link.remote_snd_settle_mode), int(link.remote_rcv_settle_mode)
                )
                if refusal is None:
                    link.source.copy(link.remote_source)
                    link.target.copy(link.remote_target)
                    link.snd_settle_mode = Link.SND_UNSETTLED
                    link.rcv_settle_mode = Link.RCV_FIRST
                    link.open()
                    self.door.commands.attach(self, link, device)
                    return
            if refusal is None:
                refusal = check_receiver_attach(source)
        self.refuse(link, refusal)

    def refuse(self, link: Link, refusal: Refusal) -> None:
        """Attach with a null terminus, then detach with the condition (the contract)."""
        self.door.stats.refused_links.labels(str(refusal.condition)).inc()
        if link.is_receiver:
            link.source.copy(link.remote_source)
        else:
            link.target.copy(link.remote_target)
        link.open()
        self.detach(link, refusal)

    def detach(self, link: Link, refusal: Refusal) -> None:
        link.condition = condition_of(refusal)
        link.close()

    def _framing_error(self) -> None:
        """End a connection whose bytes proton could not read: close it with
        ``amqp:connection:framing-error`` if it was open (else there is nothing to close)."""
        assert self.engine is not None
        conn = self.engine.connection
        if conn.state & Endpoint.REMOTE_CLOSED:
            return  # the peer's close frame ended proton's input: a clean close, not an error
        log.info("unreadable AMQP input, closing the connection")
        if conn.state & Endpoint.LOCAL_ACTIVE:
            conn.condition = Condition(str(Cond.FRAMING), "unreadable frame")
            conn.close()

    def close_with(self, condition: Cond, description: str) -> None:
        """Close the connection with ``condition`` (SIGTERM: ``amqp:connection:forced``; a
        device disabled meanwhile: ``amqp:unauthorized-access``); unsettled uploads stay
        unsettled, so clients resend them. Once: later calls do nothing."""
        if self._closing:
            return
        self._closing = True
        if self.engine is not None and not self.closed:
            conn = self.engine.connection
            conn.condition = Condition(str(condition), description)
            if conn.state & Endpoint.LOCAL_ACTIVE:
                conn.close()
            self._write_now()  # the close frame before the socket goes
        if self.writer.get_extra_info("ssl_object") is None:
            self.writer.close()
        else:
            # TLS: close() would wait for a close_notify a silent peer never sends (and a second
            # close() disarms abort()); the close frame gets a moment to leave, then the socket
            # goes and the read loop ends, as on the plain port
            asyncio.get_running_loop().call_later(_TLS_CLOSE_S, self.writer.transport.abort)


def _close(endpoint: Connection | Session | Link) -> None:
    """Answer the peer's close (unless closed here already)."""
    if endpoint.state & Endpoint.LOCAL_ACTIVE:
        endpoint.close()
