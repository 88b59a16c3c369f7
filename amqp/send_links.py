"""Links on which a client sends to a queue or an MR topic (service): each message (one Data
section or an AmqpValue string) becomes a record of the topic, its application property
``partitionKey`` the key; ``accepted`` once Kafka acknowledged it (acks=all), ``released`` if
Kafka did not take it; pre-settled (a topic's): at most once. The link's credit is given back
one message at a time, when Kafka answered. Opened by amqp.queue_links and amqp.topic_links.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message

from amqp.model import Refusal, payload_of
from amqp.queue_model import PARTITION_KEY
from bridge.mapping import KafkaRecord

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


class SendLinks:
    def __init__(self, door: Door) -> None:
        self.door = door
        self._senders: dict[tuple[int, str], str] = {}  # -> its topic
        self._tasks: set[asyncio.Task[None]] = set()

    def open_sender(self, conn: ClientConnection, link: Link, topic: str) -> None:
        """The client's sender link publishes to ``topic`` (a queue, or an MR topic:
        amqp.topic_links)."""
        link.max_message_size = self.door.cfg.max_message_bytes
        link.open()
        link.flow(self.door.cfg.link_credit)
        self._senders[_key(conn, link)] = topic

    def takes(self, conn: ClientConnection, link: Link) -> bool:
        return _key(conn, link) in self._senders

    def on_message(self, conn: ClientConnection, link: Link, dlv: Delivery, msg: Message) -> None:
        payload = payload_of(msg.body)
        if isinstance(payload, Refusal):
            self.door.uploads.refuse(conn, link, dlv, payload)
            return
        props: dict[Any, Any] = dict(msg.properties or {})
        key = props.get(PARTITION_KEY)
        topic = self._senders[_key(conn, link)]
        rec = KafkaRecord(topic, key.encode() if isinstance(key, str) else None, payload, [])
        task = asyncio.get_running_loop().create_task(self._publish(conn, link, dlv, rec))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(
        self, conn: ClientConnection, link: Link, dlv: Delivery, rec: KafkaRecord
    ) -> None:
        presettled = bool(dlv.settled)  # (a topic's sender) at most once
        if presettled:
            dlv.settle()
        error = await self.door.producer.publish([rec])
        if conn.closed or _key(conn, link) not in self._senders:
            return  # never settled: the client sends it again
        if error is not None:
            log.warning("%s: Kafka did not take a message: %s", rec.topic, error)
        if not presettled:
            dlv.update(Delivery.ACCEPTED if error is None else Delivery.RELEASED)
            dlv.settle()
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.flow(1)
        conn.flush_soon()

    def detached(self, conn: ClientConnection, link: Link) -> None:
        self._senders.pop(_key(conn, link), None)

    def forget(self, conn: ClientConnection) -> None:
        self._senders = {k: t for k, t in self._senders.items() if k[0] != id(conn)}
