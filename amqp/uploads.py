"""Devices' uploads (service): a complete transfer becomes the bridge's record (amqp.model),
goes to Kafka (amqp.kafka) under a plain int token, and is settled when Kafka answered:
``accepted``, ``rejected`` with the contract's condition once a dead letter is in Kafka, or
``released`` when Kafka did not take it. A pre-settled transfer is settled at once (at most
once). A link's credit is given back one message at a time, when Kafka answered for it.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message

from amqp.command_model import is_reply_address, parse_reply
from amqp.engine import condition_of
from amqp.model import (
    Cond,
    Outcome,
    Refusal,
    UploadAddress,
    map_amqp,
    parse_upload_address,
    payload_of,
    quota_record,
    settle_outcome,
    upload_device,
)
from api.errors import ApiError
from api.http_devices.model import DeviceRef
from bridge.mapping import KafkaRecord, Topics, tenant_topics
from bridge.quota import TenantQuotas, parse_rates
from bridge.topics import DEFAULT_TENANT, Channel

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)


@dataclass(slots=True)
class InFlight:
    conn: ClientConnection
    link: Link
    delivery: Delivery | None  # None: pre-settled, nothing to answer
    rec: KafkaRecord
    channel: Channel


class Uploads:
    def __init__(self, door: Door) -> None:
        self.door = door
        cfg = door.cfg
        self.topics = Topics(
            telemetry=cfg.topic_telemetry, events=cfg.topic_events, dlq=cfg.topic_dlq
        )
        self.quotas = TenantQuotas()
        self._static_rates = parse_rates(cfg.tenant_quotas)
        self._ready: set[str] = {DEFAULT_TENANT}
        self._tokens = itertools.count(1)
        self._inflight: dict[int, InFlight] = {}
        # (connection, link name) -> the bytes of the link's transfer under way (proton's
        # Python objects are wrappers made afresh: their id() is no key)
        self._partial: dict[tuple[int, str], bytearray] = {}
        # links whose message under way is over max-message-size: the rest is read and dropped
        self._oversized: set[tuple[int, str]] = set()
        self._msg = Message()  # decodes devices' transfers, one at a time (see _message)
        self._children: dict[tuple[str, str], Any] = {}  # the messages counter's, by labels

    def start(self) -> None:
        self.quotas.set_rates(dict(self._static_rates), time.monotonic())

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # --- transfers --------------------------------------------------------------------------

    async def on_delivery(self, conn: ClientConnection, dlv: Delivery, link: Link) -> None:
        """A transfer's frame on ``link`` (the delivery's, read once by the caller)."""
        if not dlv.readable:
            return
        if not link.state & Endpoint.LOCAL_ACTIVE:
            # detached here (an oversized message): never touch its deliveries again. proton
            # (transport.c, pni_process_tpwork_receiver) answers work on a delivery of a link
            # whose handle it already unmapped with a flow frame naming that link, handle
            # 4294967294 (-2), and the client closes the connection on an unknown handle
            return
        key = (id(conn), link.name)
        if dlv.aborted:
            self._partial.pop(key, None)
            dlv.settle()
            if key in self._oversized:
                self._detach_oversized(conn, link, key)
            return
        chunk = link.recv(dlv.pending) or b""
        if key in self._oversized:  # the rest of a message over the limit: read and dropped
            if not dlv.partial:
                self._detach_oversized(conn, link, key)
            return
        buffer = self._partial.setdefault(key, bytearray())
        buffer += chunk
        if len(buffer) > self.door.cfg.max_message_bytes:
            self._partial.pop(key, None)
            self.door.stats.messages.labels("unknown", "oversized_link").inc()
            self._oversized.add(key)
            if not dlv.partial:
                self._detach_oversized(conn, link, key)
            return
        if dlv.partial:
            return
        data = bytes(self._partial.pop(key))
        link.advance()
        await self._message(conn, link, dlv, data)

    def _detach_oversized(self, conn: ClientConnection, link: Link, key: tuple[int, str]) -> None:
        """The spec's link error for a message over max-message-size, once its last frame is
        read (its bytes were dropped as they came, never buffered): detached then, in the same
        turn as the last read, no later frame of it can reach the detached link (see
        :meth:`on_delivery`). The transfer dies with the link (never settled)."""
        self._oversized.discard(key)
        conn.detach(
            link,
            Refusal(
                Cond.MESSAGE_SIZE,
                f"message over max-message-size {self.door.cfg.max_message_bytes} bytes",
            ),
        )

    async def _message(
        self, conn: ClientConnection, link: Link, dlv: Delivery, data: bytes
    ) -> None:
        presettled = bool(dlv.settled)
        door = self.door
        # a device's upload or reply is read here and now: one Message decodes them all (a new
        # one costs a pn_message and four Data wrappers); the send links' and applications'
        # commands keep theirs, so they get a new one
        keeps = door.senders.takes(conn, link) or door.north.commands.takes(conn, link)
        msg = Message() if keeps else self._msg
        try:
            msg.decode(data)
        except Exception as exc:  # noqa: BLE001 - proton's codec errors have no common root
            self.refuse(conn, link, dlv, Refusal(
                Cond.BAD_REQUEST, f"bad_message: undecodable message: {exc}"[:500],
                {"code": "bad_message"},
            ))  # fmt: skip
            return
        if keeps and door.senders.takes(conn, link):  # to queue/{q} or topic/{t} (send_links)
            door.senders.on_message(conn, link, dlv, msg)
            return
        if keeps:  # an application's command/{tenant} (amqp.north_commands)
            door.north.commands.on_command(conn, link, dlv, msg)
            return
        address = link.target.address or msg.address
        if address and is_reply_address(address):  # a device's reply (amqp.commands)
            body = payload_of(msg.body)
            props: dict[Any, Any] = dict(msg.properties or {})
            reply = body if isinstance(body, Refusal) else parse_reply(
                conn.login.principal, address, body, props.get("status"),
                self.door.cfg.max_payload_bytes,
            )  # fmt: skip
            if isinstance(reply, Refusal):
                self.refuse(conn, link, dlv, reply)
            else:
                self.door.commands.reply(conn, link, dlv, reply)
            return
        found = parse_upload_address(address)
        device = upload_device(conn.login.principal, found) if isinstance(found, UploadAddress) \
            else found  # fmt: skip
        payload = payload_of(msg.body)
        for refused in (found, device, payload):
            if isinstance(refused, Refusal):
                self.refuse(conn, link, dlv, refused)
                return
        assert isinstance(found, UploadAddress)
        assert isinstance(device, DeviceRef)
        assert isinstance(payload, bytes)
        rec = self._record(device, found.channel, payload, presettled)
        try:
            await self.tenant_ready(device.tenant)
        except ApiError as exc:
            log.warning("topics of tenant %s not made: %s", device.tenant, exc)
        if presettled:
            dlv.settle()  # at most once; and a pre-settled delivery must be settled by hand
            if found.channel is Channel.EVENTS:
                self.door.stats.presettled_events.inc()
        token = next(self._tokens)
        self._inflight[token] = InFlight(conn, link, None if presettled else dlv, rec,
                                         found.channel)  # fmt: skip
        self.door.producer.send(rec, token, self.reported)

    def _record(
        self, device: DeviceRef, channel: Channel, payload: bytes, presettled: bool
    ) -> KafkaRecord:
        now_ms = time.time_ns() // 1_000_000
        self._rates()
        if self.quotas.buckets and not self.quotas.allow(device.tenant, time.monotonic()):
            rate = self.quotas.buckets[device.tenant].rate
            return quota_record(device, channel, payload, now_ms, topics=self.topics, rate=rate)
        return map_amqp(
            device, channel, payload, now_ms, presettled=presettled, topics=self.topics,
            max_payload_bytes=self.door.cfg.max_payload_bytes,
        )  # fmt: skip

    def refuse(self, conn: ClientConnection, link: Link, dlv: Delivery, refusal: Refusal) -> None:
        """A client error found before Kafka: rejected with its condition (pre-settled: only
        counted), and the credit given back."""
        self.door.stats.messages.labels("unknown", str(refusal.condition)).inc()
        if not dlv.settled:
            dlv.local.condition = condition_of(refusal)
            dlv.update(Delivery.REJECTED)
        dlv.settle()
        link.flow(1)

    # --- Kafka's answers --------------------------------------------------------------------

    def reported(self, token: int, ok: bool, error: str) -> None:
        """A delivery report (on the event loop): settle the transfer, give its credit back."""
        item = self._inflight.pop(token, None)
        if item is None:
            return  # its connection or link went away: nothing to answer
        outcome, refusal = settle_outcome(item.rec, ok)
        label = outcome.value if refusal is None else str(refusal.condition)
        key = (item.channel.value, label)
        counter = self._children.get(key)
        if counter is None:  # labels() costs more than the increment: looked up once
            counter = self._children[key] = self.door.stats.messages.labels(*key)
        counter.inc()
        if not ok:
            log.warning("Kafka did not take a record for %s: %s", item.rec.topic, error)
        if item.conn.closed:
            return
        dlv = item.delivery
        if dlv is not None:
            if outcome is Outcome.ACCEPTED:
                dlv.update(Delivery.ACCEPTED)
            elif outcome is Outcome.RELEASED:
                dlv.update(Delivery.RELEASED)
            else:
                assert refusal is not None
                dlv.local.condition = condition_of(refusal)
                dlv.update(Delivery.REJECTED)
            dlv.settle()
        if item.link.state & item.link.LOCAL_ACTIVE:
            item.link.flow(1)
        item.conn.flush_soon()

    def forget(self, conn: ClientConnection) -> None:
        """The connection ended: its transfers' answers are dropped (never settled)."""
        for item in self._inflight.values():
            if item.conn is conn:
                item.delivery = None
        for key in [k for k in self._partial if k[0] == id(conn)]:
            del self._partial[key]
        self._oversized = {k for k in self._oversized if k[0] != id(conn)}

    def forget_link(self, conn: ClientConnection, link: Link) -> None:
        self._partial.pop((id(conn), link.name), None)
        self._oversized.discard((id(conn), link.name))

    # --- tenants ----------------------------------------------------------------------------

    def _rates(self) -> None:
        """The registry's msgs/s quotas (they win over the static setting), as the bridge."""
        auth = self.door.logins.auth
        if auth is None:
            return
        state = auth.registry.state
        self.quotas.follow(
            self._static_rates, state.tenants, state.tenants_version, time.monotonic()
        )

    async def tenant_ready(self, tenant: str) -> None:
        """The tenant's topics exist (the bridge's partition counts) before its first record."""
        if tenant in self._ready:
            return
        admin = self.door.admin
        names = await admin.topics()
        own = tenant_topics(self.topics, tenant)
        for base, name in zip(self.topics.all()[:3], own.all()[:3], strict=True):
            if name not in names:
                await admin.ensure(name, names.get(base, 0))
        self._ready.add(tenant)
