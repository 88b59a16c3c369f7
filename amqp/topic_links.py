"""MR topics as AMQP addresses (service): ``topic/{name}[::{group}]`` (amqp.topic_model).

- Receiver link (the client receives): a member of the link's consumer group
  (amqp.topic_model.topic_group_id) through amqp.north_kafka.StreamFeed, as a northbound
  telemetry link: opened once the member holds its partitions (a group's first member starts
  at the topic's end), records sent only while the link has credit (the consumer paused at
  0). Unsettled: ``accepted`` or ``rejected`` -> committed past; ``released`` or ``modified``
  -> sent again on this link before newer records. Pre-settled: at most once. A link or
  connection gone: what it left unsettled is not committed (the group's next member gets it).
- Sender link (the client sends): published to the topic, ``accepted`` once Kafka acknowledged
  it (amqp.send_links, the same path as a queue's).
- Attach: iot-api's access rule on the topic, then the topic must exist (``amqp:not-found``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from proton import Delivery, Link

from amqp.late_attach import accepted
from amqp.model import RCV_SETTLE_FIRST, Cond, Refusal
from amqp.north_kafka import StreamFeed
from amqp.north_model import Record, north_refusal
from amqp.paced_link import PacedLink
from amqp.queue_model import PARTITION_KEY, SND_SETTLED
from amqp.topic_model import TopicAddress, parse_topic_address, topic_group_id
from amqp.wire import encode_message
from api.plumbing.access import Access, topic_tenant
from bridge.topics import DEFAULT_TENANT

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)
READY_S = 15.0  # opened after this long even if Kafka assigned nothing yet


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


def _message(rec: Record) -> bytes:
    """The record as the receiver gets it (encoded by amqp.wire, as proton would)."""
    props: dict[str, str] = {}
    if rec.key is not None:
        props[PARTITION_KEY] = rec.key.decode("utf-8", "replace")
    return encode_message(
        rec.value,
        annotations={"x-opt-kafka-partition": rec.partition, "x-opt-kafka-offset": rec.offset},
        properties=props,
        creation_ms=rec.timestamp_ms,
    )


class TopicLinks:
    def __init__(self, door: Door) -> None:
        self.door = door
        self._links: dict[tuple[int, str], PacedLink] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def close(self) -> None:
        for tr in list(self._links.values()):
            self._end(tr)

    # --- attach -----------------------------------------------------------------------------

    def attach(self, conn: ClientConnection, link: Link) -> bool:
        address = link.remote_source.address if link.is_sender else link.remote_target.address
        found = parse_topic_address(address)
        if found is None:
            return False
        task = asyncio.get_running_loop().create_task(self._attach(conn, link, found))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _attach(
        self, conn: ClientConnection, link: Link, found: TopicAddress | Refusal
    ) -> None:
        decision = found if isinstance(found, Refusal) else self._refusal(conn, link, found)
        if not await accepted(conn, link, decision):
            return
        assert isinstance(found, TopicAddress)
        if link.is_receiver:  # the client sends
            self.door.senders.open_sender(conn, link, found.topic)
            conn.flush_soon()
            return
        presettled = int(link.remote_snd_settle_mode) == SND_SETTLED
        tr = PacedLink(conn, link, presettled, _message, self.door.cfg.link_credit)
        tr.feed = StreamFeed(
            self.door.cfg.kafka_bootstrap, found.topic, topic_group_id(found, link.name),
            on_records=tr.take, on_ready=tr.ready,
            stall_s=self.door.cfg.kafka_consumer_stall_s,
            on_renewed=lambda: self.door.stats.renewed("north"),
        )  # fmt: skip
        self.door.stats.watched("north", tr.feed.stall)
        self._links[_key(conn, link)] = tr
        tr.feed.start()
        asyncio.get_running_loop().call_later(READY_S, tr.ready)

    async def _refusal(
        self, conn: ClientConnection, link: Link, found: TopicAddress
    ) -> Refusal | None:
        if int(link.remote_rcv_settle_mode) != RCV_SETTLE_FIRST:
            return Refusal(Cond.NOT_IMPLEMENTED, "rcv-settle-mode second is not supported")
        if len(self._links) >= self.door.cfg.north_max_links and link.is_sender:
            return Refusal(Cond.RESOURCE_LIMIT, f"over {self.door.cfg.north_max_links} readers")
        auth = self.door.logins.auth
        tenants = None if auth is None else auth.tenants()
        refusal = north_refusal(
            conn.login.principal, conn.login.caller,
            tenant=DEFAULT_TENANT if tenants is None else topic_tenant(found.topic, tenants),
            topic=found.topic, access=Access.READ if link.is_sender else Access.WRITE,
            acl=None if auth is None else auth.acl(found.topic), tenants=tenants,
        )  # fmt: skip
        if refusal is not None:
            return refusal
        if found.topic not in await self.door.admin.topics():
            return Refusal(Cond.NOT_FOUND, f"no topic {found.topic}")
        return None

    def on_flow(self, conn: ClientConnection, link: Link) -> None:
        tr = self._links.get(_key(conn, link))
        if tr is not None:
            tr.pump()

    def on_disposition(self, conn: ClientConnection, dlv: Delivery, key: tuple[int, str]) -> bool:
        tr = self._links.get(key)
        if tr is None:
            return False
        tr.settle(dlv)
        return True

    # --- gone -------------------------------------------------------------------------------

    def detached(self, conn: ClientConnection, link: Link) -> None:
        tr = self._links.get(_key(conn, link))
        if tr is not None:
            tr.detached()
            self._end(tr)

    def forget(self, conn: ClientConnection) -> None:
        for tr in [t for t in self._links.values() if t.conn is conn]:
            self._end(tr)

    def _end(self, tr: PacedLink) -> None:
        """Unsettled records are not committed: the group's next member sends them again."""
        self._links.pop(_key(tr.conn, tr.link), None)
        tr.end()
