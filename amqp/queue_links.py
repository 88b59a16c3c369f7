"""The HTTP door's queues over AMQP (service): ``queue/{q}`` links (amqp.queue_model for the
addresses and outcomes; api.queues for the queue model, its consumer group and settings, the
same as iot-api's, so HTTP and AMQP consumers of one queue compete for its messages).

- Sender link (the client sends): each message is published to ``q``; ``accepted`` once Kafka
  acknowledged it, ``released`` if Kafka did not take it; credit given back per answer.
- Receiver link (the client receives): one member of the queue's group
  (``iot-api.queue--{q}``) per queue in this process, shared by its links; it fetches no more
  than the links' credit. Each fetched message gets a ``start`` marker (token, deadline,
  count) in Kafka before the transfer is sent; the offsets are committed past it (the markers
  own it now). The outcome writes the answer marker (amqp.queue_model.answer_for). A link or
  connection gone with transfers unsettled: a ``nack`` for each (delivered again at once).
- A transfer still unsettled: its deadline renewed (``renew`` markers) while the link lives.
- Redelivery and dead letters are done by the markers' owner, iot-api's tracker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message, symbol

from amqp.late_attach import accepted
from amqp.model import Cond, Refusal
from amqp.north_model import north_refusal
from amqp.queue_model import (
    PARTITION_KEY,
    Outcome,
    QueueAddress,
    amqp_delivery_count,
    answer_for,
    check_queue_settle_modes,
    parse_queue_address,
)
from api.plumbing.access import Access, topic_tenant
from api.queues import model as qm
from api.queues.kafka import QueueConsumer, Received
from api.queues.settings import QueueSettingsStore
from bridge.mapping import KafkaRecord
from bridge.topics import DEFAULT_TENANT
from kafka_watch.stall import StallJudge

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)
_FETCH_MAX = 100  # messages handed out per round (bounded by the links' credit)
_WAIT_S = 0.5
_RENEW_EVERY_S = 0.5


def _outcome(state: Any) -> Outcome:
    """A receiver's disposition; settled with none: given back (released)."""
    if state == Delivery.ACCEPTED:
        return Outcome.ACCEPTED
    if state == Delivery.MODIFIED:
        return Outcome.MODIFIED
    if state == Delivery.REJECTED:
        return Outcome.REJECTED
    return Outcome.RELEASED


@dataclass(eq=False, slots=True)
class QueueReceiver:
    conn: ClientConnection
    link: Link
    queue: str
    unsettled: dict[bytes, qm.Handle] = field(default_factory=dict)
    active: bool = True


@dataclass(eq=False, slots=True)
class QueueFeed:
    """One queue's group member in this process and the receiver links it feeds."""

    queue: str
    links: list[QueueReceiver] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    turn: int = 0


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


def _tag(dlv: Delivery) -> bytes:
    tag = dlv.tag
    return tag.encode() if isinstance(tag, str) else bytes(tag)


class QueueLinks:
    def __init__(self, door: Door) -> None:
        self.door = door
        cfg = door.cfg
        self.settings = QueueSettingsStore(cfg.kafka_bootstrap, cfg.queue_settings_topic)
        self._defaults = qm.QueueSettings(cfg.queue_visibility_s, cfg.queue_max_deliveries)
        self._receivers: dict[tuple[int, str], QueueReceiver] = {}
        self._feeds: dict[str, QueueFeed] = {}
        self._tags = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    def start(self) -> None:
        self.settings.start()
        self._spawn(self._renew())

    async def close(self) -> None:
        self._closing = True
        for qr in list(self._receivers.values()):
            self._end(qr)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)
        await asyncio.to_thread(self.settings.stop)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- attach -----------------------------------------------------------------------------

    def attach(self, conn: ClientConnection, link: Link) -> bool:
        """Take a ``queue/{q}`` link (decided after the queue is looked up); False if the link
        names no queue."""
        address = link.remote_source.address if link.is_sender else link.remote_target.address
        found = parse_queue_address(address)
        if found is None:
            return False
        self._spawn(self._attach(conn, link, found))
        return True

    async def _attach(
        self, conn: ClientConnection, link: Link, found: QueueAddress | Refusal
    ) -> None:
        decision = found if isinstance(found, Refusal) else self._refusal(conn, link, found)
        if not await accepted(conn, link, decision):
            return
        assert isinstance(found, QueueAddress)
        if link.is_receiver:  # the client sends
            self.door.senders.open_sender(conn, link, found.queue)
        else:
            link.open()
            qr = QueueReceiver(conn, link, found.queue)
            self._receivers[_key(conn, link)] = qr
            feed = self._feeds.get(found.queue)
            if feed is None:
                feed = self._feeds[found.queue] = QueueFeed(found.queue)
                feed.links.append(qr)
                self._spawn(self._serve(feed))
            else:
                feed.links.append(qr)
        conn.flush_soon()

    async def _refusal(
        self, conn: ClientConnection, link: Link, found: QueueAddress
    ) -> Refusal | None:
        refusal = check_queue_settle_modes(
            int(link.remote_snd_settle_mode), int(link.remote_rcv_settle_mode)
        )
        if refusal is not None:
            return refusal
        auth = self.door.logins.auth
        tenants = None if auth is None else auth.tenants()
        queue = found.queue
        refusal = north_refusal(
            conn.login.principal, conn.login.caller,
            tenant=DEFAULT_TENANT if tenants is None else topic_tenant(queue, tenants),
            topic=queue, access=Access.READ if link.is_sender else Access.WRITE,
            acl=None if auth is None else auth.acl(queue), tenants=tenants,
        )  # fmt: skip
        if refusal is not None:
            return refusal
        names = await self.door.admin.topics()
        if queue not in names:
            return Refusal(Cond.NOT_FOUND, f"no queue {queue} (PUT /queues/{queue} makes one)")
        if link.is_sender and qm.dead_letter_topic(queue) not in names:
            await self.door.admin.ensure(qm.dead_letter_topic(queue), names[queue])
        return None

    # --- the client receives ----------------------------------------------------------------

    def _credit(self, feed: QueueFeed) -> int:
        return sum(
            qr.link.credit
            for qr in feed.links
            if qr.active and qr.link.state & Endpoint.LOCAL_ACTIVE
        )

    async def _serve(self, feed: QueueFeed) -> None:
        """Fetch what the links' credit allows, write the starts, commit, send; until the
        queue's last link here is gone (then its partitions go to the group's others)."""
        consumer: QueueConsumer | None = None
        try:
            cfg = self.door.cfg
            judge = StallJudge(f"amqp queue {feed.queue}", cfg.kafka_consumer_stall_s)
            tally = self.door.stats.watched("queue", judge)
            consumer = await asyncio.to_thread(
                QueueConsumer, cfg.kafka_bootstrap, feed.queue, buffer_max=_FETCH_MAX,
                stall=judge, tally=tally,
            )  # fmt: skip
            while feed.links:
                credit = self._credit(feed)
                if credit <= 0:
                    feed.wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(feed.wake.wait(), _WAIT_S)
                    await consumer.keep_alive()  # take part in rebalances
                    continue
                await self._round(feed, consumer, min(credit, _FETCH_MAX))
        except Exception:
            log.exception("queue %s: the AMQP feed stopped", feed.queue)
            for qr in list(feed.links):
                qr.conn.detach(qr.link, Refusal(Cond.INTERNAL, "the queue's feed stopped"))
                qr.conn.flush_soon()
                self._end(qr)
        finally:
            if self._feeds.get(feed.queue) is feed:
                del self._feeds[feed.queue]
            if consumer is not None:
                await asyncio.to_thread(consumer.close_blocking)

    async def _round(self, feed: QueueFeed, consumer: QueueConsumer, count: int) -> None:
        async with consumer.lock:
            fetched = await consumer.fetch(count, _WAIT_S)
            # the links' credit may have gone while it waited (a link detached): what is not
            # handed out stays uncommitted, for the next round or the group's next member
            fetched = fetched[: self._credit(feed)]
            if not fetched:
                return
            own = self.settings.get(feed.queue) or self._defaults
            deadline = int(time.time() * 1000) + int(own.visibility_s * 1000)
            handles = [
                qm.Handle(feed.queue, r.partition, r.offset, r.token, deadline, r.count + 1)
                for r in fetched
            ]
            error = await self.door.producer.publish([
                KafkaRecord(
                    self.door.cfg.queue_markers_topic, qm.marker_key(feed.queue, r.partition),
                    qm.start_marker(h, own.max_deliveries, r.key, r.value), [],
                )
                for h, r in zip(handles, fetched, strict=True)
            ])  # fmt: skip
            if error is not None:  # not handed out; the next round writes the same tokens
                log.warning("queue %s: start markers not written: %s", feed.queue, error)
                await asyncio.sleep(_WAIT_S)
                return
            await consumer.commit(fetched)
        gone: list[qm.Handle] = []
        for h, r in zip(handles, fetched, strict=True):
            if not self._send(feed, h, r):
                gone.append(h)
        if gone:  # every link went away meanwhile: given back at once
            await self._answer(gone, Outcome.RELEASED, 0)

    def _send(self, feed: QueueFeed, handle: qm.Handle, rec: Received) -> bool:
        """The message to the next link with credit (round robin); False if none has."""
        links = [
            qr for qr in feed.links
            if qr.active and qr.link.credit > 0 and qr.link.state & Endpoint.LOCAL_ACTIVE
        ]  # fmt: skip
        if not links:
            return False
        qr = links[feed.turn % len(links)]
        feed.turn += 1
        count, first = amqp_delivery_count(handle.count)
        msg = Message(body=rec.value, delivery_count=count, first_acquirer=first, inferred=True)
        props: dict[str, Any] = {}
        msg.annotations = {
            symbol("x-opt-kafka-partition"): rec.partition,
            symbol("x-opt-kafka-offset"): rec.offset,
        }
        if rec.key is not None:
            props[PARTITION_KEY] = rec.key.decode("utf-8", "replace")
        msg.properties = props  # type: ignore[assignment]  # proton types it None
        tag = str(next(self._tags))
        qr.link.delivery(tag)
        qr.link.send(msg.encode())
        qr.link.advance()
        qr.unsettled[tag.encode()] = handle
        qr.conn.flush_soon()
        return True

    def on_flow(self, conn: ClientConnection, link: Link) -> None:
        qr = self._receivers.get(_key(conn, link))
        if qr is not None:
            feed = self._feeds.get(qr.queue)
            if feed is not None:
                feed.wake.set()

    def on_disposition(self, conn: ClientConnection, dlv: Delivery, key: tuple[int, str]) -> bool:
        """A receiver's outcome for a queue message; False if the link is none of ours."""
        qr = self._receivers.get(key)
        if qr is None:
            return False
        state = dlv.remote_state
        if not (dlv.settled or state):
            return True
        handle = qr.unsettled.pop(_tag(dlv), None)
        dlv.settle()
        if handle is not None:
            outcome = _outcome(state)
            own = self.settings.get(qr.queue) or self._defaults
            self._spawn(self._answer([handle], outcome, int(own.visibility_s * 1000)))
        return True

    async def _answer(self, handles: list[qm.Handle], outcome: Outcome, visibility_ms: int) -> None:
        now = int(time.time() * 1000)
        error = await self.door.producer.publish([
            KafkaRecord(
                self.door.cfg.queue_markers_topic, qm.marker_key(h.queue, h.partition),
                answer_for(outcome, h, now, visibility_ms), [],
            )
            for h in handles
        ])  # fmt: skip
        if error is not None:  # the visibility timeout brings them back
            log.warning("queue answers (%s) not written: %s", outcome, error)

    async def _renew(self) -> None:
        """While a transfer is unsettled its receiver holds the message (AMQP cannot take it
        back): a ``renew`` marker moves its deadline a visibility timeout on, once a third of
        it is left, so the markers' owner does not deliver it again meanwhile."""
        while not self._closing:
            await asyncio.sleep(_RENEW_EVERY_S)
            now = int(time.time() * 1000)
            due: list[tuple[QueueReceiver, bytes, qm.Handle]] = []
            for qr in list(self._receivers.values()):
                own = self.settings.get(qr.queue) or self._defaults
                visibility = int(own.visibility_s * 1000)
                for tag, h in qr.unsettled.items():
                    if h.deadline_ms - now < visibility * 2 // 3:
                        due.append((qr, tag, replace(h, deadline_ms=now + visibility)))
            if not due:
                continue
            error = await self.door.producer.publish([
                KafkaRecord(
                    self.door.cfg.queue_markers_topic, qm.marker_key(h.queue, h.partition),
                    qm.answer_marker(qm.RENEW, h, h.deadline_ms), [],
                )
                for _qr, _tag, h in due
            ])  # fmt: skip
            if error is not None:
                log.warning("queue deadlines not renewed: %s", error)
                continue
            for qr, tag, h in due:
                if tag in qr.unsettled:
                    qr.unsettled[tag] = h

    # --- links and connections gone ---------------------------------------------------------

    def detached(self, conn: ClientConnection, link: Link) -> None:
        key = _key(conn, link)
        qr = self._receivers.get(key)
        if qr is not None:
            self._end(qr)

    def forget(self, conn: ClientConnection) -> None:
        for qr in [q for q in self._receivers.values() if q.conn is conn]:
            self._end(qr)

    def _end(self, qr: QueueReceiver) -> None:
        """What the link held unsettled is given back at once (the receiver is gone)."""
        if not qr.active:
            return
        qr.active = False
        self._receivers.pop(_key(qr.conn, qr.link), None)
        feed = self._feeds.get(qr.queue)
        if feed is not None and qr in feed.links:
            feed.links.remove(qr)
            feed.wake.set()
        if qr.unsettled:
            self._spawn(self._answer(list(qr.unsettled.values()), Outcome.RELEASED, 0))
            qr.unsettled.clear()
