"""proton's AMQP engine over an asyncio stream (adapter): a server ``Transport`` without a SASL
layer of its own (amqp.sasl does that before), its ``Connection`` and event ``Collector``.
Bytes in with :meth:`push`, bytes out with :meth:`output`; everything on the event loop's
thread (no proton object may touch another thread)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cproton import (
    isnull,
    pn_collector_peek,
    pn_collector_pop,
    pn_event_delivery,
    pn_event_link,
    pn_event_type,
)
from proton import Collector, Condition, Connection, Delivery, Event, Link, Transport, symbol

from amqp.model import Refusal


def condition_of(refusal: Refusal) -> Condition:
    """The AMQP error of a refusal: condition, description, info (e.g. ``{code: not_json}``)."""
    info: dict[Any, Any] | None = None
    if refusal.info:
        info = {symbol(k): v for k, v in refusal.info.items()}
    return Condition(str(refusal.condition), refusal.description, info)


class Engine:
    def __init__(self, *, max_frame_bytes: int, idle_timeout_s: float) -> None:
        self.transport = Transport(Transport.SERVER)
        self.transport.max_frame_size = max_frame_bytes
        if idle_timeout_s > 0:
            self.transport.idle_timeout = idle_timeout_s
        self.connection = Connection()
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)

    def push(self, data: bytes) -> None:
        """Feed bytes from the peer (dropped once the transport takes no more input)."""
        view = memoryview(data)
        while view:
            room = self.transport.capacity()
            if room <= 0:  # input closed (unreadable bytes): :attr:`input_closed`
                return
            chunk = view[:room]
            self.transport.push(bytes(chunk))
            view = view[len(chunk) :]

    @property
    def input_closed(self) -> bool:
        """proton reads no more input (it found bytes it cannot read, or the peer's EOF)."""
        return bool(self.transport.capacity() < 0)

    def close_input(self) -> None:
        self.transport.close_tail()

    def output(self) -> bytes | None:
        """What to write to the peer now (b"" = nothing yet); None once the output is closed."""
        pending = self.transport.pending()
        if pending < 0:
            return None
        if pending == 0:
            return b""
        out = self.transport.peek(pending) or b""
        self.transport.pop(len(out))
        return bytes(out)

    def tick(self, now_s: float) -> float:
        """Idle-timeout housekeeping; the next deadline (0 = none)."""
        deadline: float = self.transport.tick(now_s)
        return deadline

    def events(self, wanted: frozenset[int] | None = None) -> Iterator[Event]:
        """proton's events in order, as ``Event`` objects (see :meth:`raw_events`)."""
        for _number, impl in self.raw_events(wanted):
            yield Event.wrap(impl)

    def raw_events(self, wanted: frozenset[int] | None = None) -> Iterator[tuple[int, Any]]:
        """proton's events in order as (type number, C event), valid until the next one;
        ``wanted``: only those of these types (``Event.DELIVERY.number``...), the others are
        dropped unwrapped. An ``Event`` costs a wrapper for each of its delivery, link,
        session, connection and transport (and proton makes several events per transfer that
        iot-amqp has nothing to do for): :func:`delivery_of` and :func:`link_of` make one."""
        collector = self.collector._impl
        while True:
            impl = pn_collector_peek(collector)
            if isnull(impl):
                return
            number = pn_event_type(impl)
            if wanted is not None and number not in wanted:
                pn_collector_pop(collector)
                continue
            try:
                yield number, impl
            finally:
                pn_collector_pop(collector)

    @property
    def closed(self) -> bool:
        return bool(self.transport.closed)


def delivery_of(event: Any) -> Delivery | None:
    """The delivery of a C event from :meth:`Engine.raw_events` (one wrapper)."""
    dlv: Delivery | None = Delivery.wrap(pn_event_delivery(event))
    return dlv


def link_of(event: Any) -> Link | None:
    """The link of a C event from :meth:`Engine.raw_events` (one wrapper)."""
    link: Link | None = Link.wrap(pn_event_link(event))
    return link
