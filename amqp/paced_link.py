"""A receiver link fed from a Kafka consumer, paced by the link's credit (service): what the
northbound ``telemetry/{tenant}``/``event/{tenant}`` links (amqp.northbound) and the MR topic
links (amqp.topic_links) share; each says only how a record becomes a message.

- Opened once the feed holds its partitions (or after a wait): what is written after the
  attach is received.
- Records are sent only while the link has credit; the feed is asked for no more than the
  credit left (its consumer paused at 0), so nothing piles up here.
- Unsettled: ``accepted``/``rejected`` -> done, the feed may commit past it;
  ``released``/``modified`` -> sent again on this link before newer records. Pre-settled:
  done when sent. The link gone: nothing unsettled is committed (the next member gets it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proton import Delivery, Endpoint, Link

from amqp.north_kafka import StreamFeed
from amqp.north_model import Record

if TYPE_CHECKING:
    from amqp.connection import ClientConnection


def _nothing() -> None:
    return None


@dataclass(eq=False, slots=True)
class PacedLink:
    conn: ClientConnection
    link: Link
    presettled: bool
    message: Callable[[Record], bytes]  # a record as the encoded message sent (amqp.wire)
    credit_cap: int  # never ask the feed for more than this at once
    on_sent: Callable[[], None] = _nothing
    feed: StreamFeed | None = None
    queue: deque[Record] = field(default_factory=deque)
    unsettled: dict[bytes, Record] = field(default_factory=dict)
    asked: int = 0
    opened: bool = False
    active: bool = True
    tags: int = 0
    pump_due: bool = False

    def ready(self) -> None:
        """The feed holds its partitions (or the wait is over): open the link."""
        if self.opened or not self.active or self.conn.closed:
            return
        self.opened = True
        self.link.open()
        self.pump()

    def take(self, batch: list[Record]) -> None:
        """Records the feed fetched for what was asked."""
        self.asked -= len(batch)
        if self.active:
            self.queue.extend(batch)
            self.pump()

    def pump(self) -> None:
        """Send what credit allows; ask the feed for as much as the credit left."""
        link = self.link
        if not self.opened or not self.active or not link.state & Endpoint.LOCAL_ACTIVE:
            return
        while link.credit > 0 and self.queue:
            self._send(self.queue.popleft())
        if link.drain_mode and not self.queue:
            link.drained()
        want = min(link.credit, self.credit_cap) - len(self.queue) - self.asked
        if want > 0 and self.feed is not None:
            self.feed.grant(want)
            self.asked += want
        self.conn.flush_soon()

    def pump_soon(self) -> None:
        """:meth:`pump` on the loop's next turn, once for all the outcomes read meanwhile (an
        application settling each record would otherwise cost a pump per record)."""
        if not self.pump_due:
            self.pump_due = True
            asyncio.get_running_loop().call_soon(self._pump_now)

    def _pump_now(self) -> None:
        self.pump_due = False
        self.pump()

    def _send(self, rec: Record) -> None:
        self.tags += 1
        tag = str(self.tags)
        dlv = self.link.delivery(tag)
        self.link.send(self.message(rec))
        self.link.advance()
        self.on_sent()
        if self.presettled:
            dlv.settle()
            assert self.feed is not None
            self.feed.settled(rec)
        else:
            self.unsettled[tag.encode()] = rec

    def settle(self, dlv: Delivery) -> object | None:
        """The client's outcome for ``dlv``; the outcome (a Delivery state) if it was a record
        of this link, None if not final yet or not known."""
        if not (dlv.settled or dlv.remote_state):
            return None
        tag = dlv.tag
        rec = self.unsettled.pop(tag.encode() if isinstance(tag, str) else bytes(tag), None)
        state = dlv.remote_state
        dlv.settle()
        found = None
        if rec is not None and self.feed is not None:
            if state in (Delivery.RELEASED, Delivery.MODIFIED):
                self.queue.appendleft(rec)  # sent again, before anything newer
            else:
                self.feed.settled(rec)
            found = state
        self.pump_soon()
        return found

    def detached(self) -> None:
        """Answer the detach of a link never opened here, then :meth:`end`."""
        if not self.opened:
            self.opened = True
            self.link.open()
            self.link.close()
        self.end()

    def end(self) -> bool:
        """Stop; unsettled records are not committed. False if it had ended already."""
        if not self.active:
            return False
        self.active = False
        if self.feed is not None:
            self.feed.close()
        self.queue.clear()
        self.unsettled.clear()
        return True
