"""Northbound links of applications (service): Hono's AMQP APIs over our Kafka
(amqp.north_model for the addresses, rights and messages; amqp.north_kafka for Kafka).

- ``telemetry/{tenant}``, ``event/{tenant}``: the link is opened once its consumer has its
  partitions (so what is written after the attach is received). Records are sent only while
  the link has credit; the consumer is asked for no more than the credit (paused at 0).
  Unsettled: ``accepted`` or ``rejected`` -> done, the offset may be committed past it;
  ``released`` or ``modified`` -> sent again on this link before newer records. Pre-settled
  (at most once): done when sent. A link or connection gone: nothing unsettled is committed,
  so the next receiver with the link name gets it again (at least once).
- ``command/{tenant}``, ``command_response/{tenant}/{reply_id}``: amqp.north_commands.
- Every attach is decided first by iot-api's own access rule (amqp.north_model.north_refusal).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proton import Delivery, Link

from amqp.model import RCV_SETTLE_FIRST, Cond, Refusal
from amqp.north_commands import AppCommands
from amqp.north_kafka import StreamFeed
from amqp.north_model import (
    CommandTarget,
    Record,
    ReplySource,
    StreamSource,
    group_id,
    north_refusal,
    parse_source,
    parse_target,
    stream_properties,
)
from amqp.paced_link import PacedLink
from amqp.wire import encode_message
from api.errors import ApiError
from api.plumbing.access import Access
from bridge.mapping import Topics, tenant_topics
from bridge.topics import Channel, tenant_kafka_topic

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)
READY_S = 15.0  # a stream link is opened after this long even if Kafka assigned nothing yet
SND_SETTLED = 1


@dataclass(eq=False, slots=True)
class StreamLink:
    source: StreamSource
    paced: PacedLink


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


def _message(source: StreamSource, rec: Record) -> bytes:
    """The record as the application gets it (encoded by amqp.wire, as proton would)."""
    return encode_message(
        rec.value,
        annotations={"x-opt-kafka-partition": rec.partition, "x-opt-kafka-offset": rec.offset},
        properties=stream_properties(rec, source.tenant),
        creation_ms=rec.timestamp_ms,
        content_type="application/json",
        durable=source.channel is Channel.EVENTS,
    )


class Northbound:
    def __init__(self, door: Door) -> None:
        self.door = door
        cfg = door.cfg
        self.topics = Topics(
            telemetry=cfg.topic_telemetry, events=cfg.topic_events, dlq=cfg.topic_dlq
        )
        self._streams: dict[tuple[int, str], StreamLink] = {}
        self.commands = AppCommands(door)  # command/{tenant}, command_response/{tenant}/{id}
        self._tasks: set[asyncio.Task[None]] = set()
        self._children: dict[tuple[str, str], Any] = {}

    async def close(self) -> None:
        for sl in list(self._streams.values()):
            self._end(sl)
        await self.commands.close()

    # --- attach -----------------------------------------------------------------------------

    def attach(self, conn: ClientConnection, link: Link) -> bool:
        """Open or refuse a northbound link; False if it is none (a device's link)."""
        if link.is_sender:
            found: Any = parse_source(link.remote_source.address)
        else:
            found = parse_target(link.remote_target.address)
        if found is None:
            return False
        refusal = found if isinstance(found, Refusal) else self._refusal(conn, link, found)
        if refusal is not None:
            conn.refuse(link, refusal)
            return True
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = RCV_SETTLE_FIRST
        if isinstance(found, StreamSource):
            self._open_stream(conn, link, found)
            return True
        link.open()
        if isinstance(found, CommandTarget):
            self.commands.open_sink(conn, link, found)
        else:
            self.commands.open_replies(conn, link, found)
        return True

    def _refusal(self, conn: ClientConnection, link: Link, found: Any) -> Refusal | None:
        cfg = self.door.cfg
        if isinstance(found, StreamSource):
            own = tenant_topics(self.topics, found.tenant)
            topic = own.telemetry if found.channel is Channel.TELEMETRY else own.events
            access = Access.READ
        elif isinstance(found, ReplySource):
            topic = tenant_kafka_topic(cfg.topic_command_replies, found.tenant)
            access = Access.READ
        else:
            topic, access = tenant_kafka_topic(cfg.topic_commands, found.tenant), Access.WRITE
        auth = self.door.logins.auth
        refusal = north_refusal(
            conn.login.principal, conn.login.caller, tenant=found.tenant, topic=topic,
            access=access, acl=None if auth is None else auth.acl(topic),
            tenants=None if auth is None else auth.tenants(),
        )  # fmt: skip
        if refusal is not None:
            return refusal
        if isinstance(found, StreamSource):
            if len(self._streams) >= cfg.north_max_links:
                return Refusal(Cond.RESOURCE_LIMIT, f"over {cfg.north_max_links} stream links")
            settled = int(link.remote_snd_settle_mode) == SND_SETTLED
            if found.channel is Channel.EVENTS and settled:
                return Refusal(Cond.PRECONDITION, "events are at least once: attach unsettled")
        return None

    # --- telemetry and events ---------------------------------------------------------------

    def _open_stream(self, conn: ClientConnection, link: Link, source: StreamSource) -> None:
        own = tenant_topics(self.topics, source.tenant)
        topic = own.telemetry if source.channel is Channel.TELEMETRY else own.events
        sent = self._counter(source.channel.value, "sent")
        paced = PacedLink(
            conn, link, int(link.remote_snd_settle_mode) == SND_SETTLED,
            lambda rec: _message(source, rec), self.door.cfg.link_credit, sent.inc,
        )  # fmt: skip
        paced.feed = StreamFeed(
            self.door.cfg.kafka_bootstrap, topic, group_id(source, link.name),
            on_records=paced.take, on_ready=paced.ready,
            stall_s=self.door.cfg.kafka_consumer_stall_s,
            on_renewed=lambda: self.door.stats.renewed("north"),
        )  # fmt: skip
        self.door.stats.watched("north", paced.feed.stall)
        sl = StreamLink(source, paced)
        self._streams[_key(conn, link)] = sl
        self.door.stats.north_links.inc()
        task = asyncio.get_running_loop().create_task(self._start(sl))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, sl: StreamLink) -> None:
        """The tenant's topics exist (as before its first upload), then the feed starts; the
        link is opened when Kafka assigned it partitions, or after :data:`READY_S`."""
        try:
            await self.door.uploads.tenant_ready(sl.source.tenant)
        except ApiError as exc:
            log.warning("topics of tenant %s not made: %s", sl.source.tenant, exc)
        paced = sl.paced
        if paced.active and paced.feed is not None:
            paced.feed.start()
            asyncio.get_running_loop().call_later(READY_S, paced.ready)

    def on_flow(self, conn: ClientConnection, link: Link) -> None:
        key = _key(conn, link)
        if key in self._streams:
            self._streams[key].paced.pump()
        else:
            self.commands.on_flow(conn, link)

    def on_disposition(self, conn: ClientConnection, dlv: Delivery, key: tuple[int, str]) -> bool:
        """An application settled a record or reply; False if the link is none of ours."""
        sl = self._streams.get(key)
        if sl is None:
            return self.commands.on_disposition(conn, dlv, key)
        state = sl.paced.settle(dlv)
        if state is not None:
            if state in (Delivery.RELEASED, Delivery.MODIFIED):
                outcome = "released"
            else:
                outcome = "rejected" if state == Delivery.REJECTED else "accepted"
            self._counter(sl.source.channel.value, outcome).inc()
        return True

    def _counter(self, channel: str, outcome: str) -> Any:
        """The north_messages child for (channel, outcome), looked up once (labels() costs
        more than the increment)."""
        child = self._children.get((channel, outcome))
        if child is None:
            child = self._children[(channel, outcome)] = self.door.stats.north_messages.labels(
                channel, outcome
            )
        return child

    def detached(self, conn: ClientConnection, link: Link) -> None:
        key = _key(conn, link)
        self.commands.detached(conn, link)
        sl = self._streams.get(key)
        if sl is not None:
            sl.paced.detached()
            self._end(sl)

    def forget(self, conn: ClientConnection) -> None:
        for sl in [s for s in self._streams.values() if s.paced.conn is conn]:
            self._end(sl)
        self.commands.forget(conn)

    def _end(self, sl: StreamLink) -> None:
        """Unsettled records are not committed: the group's next member sends them again."""
        if self._streams.pop(_key(sl.paced.conn, sl.paced.link), None) is not None:
            sl.paced.end()
            self.door.stats.north_links.dec()
