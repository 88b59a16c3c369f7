"""Applications' commands and their replies (service), for amqp.northbound:

- ``command/{tenant}`` (the application's sender link): each message is written to
  ``iot.commands`` with the command path's own client (``commands.client.CommandClient``, as
  ``iot-cmd`` writes them, with the ``tenant`` header), ``accepted`` once Kafka holds it,
  ``released`` if Kafka did not take it, ``rejected`` for a malformed one
  (amqp.north_model.parse_command).
- ``command_response/{tenant}/{reply_id}`` (its receiver link): the replies
  (``iot.command-replies``, followed from the first need on) of the commands this iot-amqp took
  with that ``reply-to``. The route (command id -> reply address) lives in this process: a
  reply with no link attached, or to another instance's command, is dropped (counted), as Hono
  keeps no reply for a link that is not there.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message, int32

from amqp.engine import condition_of
from amqp.model import Cond, Refusal
from amqp.north_kafka import ReplyFollower
from amqp.north_model import AppCommand, CommandTarget, ReplySource, parse_command, reply_message
from api.errors import ApiError
from appconfig.kafka_security import client_base
from bridge.topics import DEFAULT_TENANT
from commands.client import CommandClient
from commands.model import CommandPathError

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)
_ROUTE_S = 600.0  # how long a reply route is kept when the command gives no ttl
_REPLY_QUEUE = 1000  # replies kept per link while it has no credit (more are dropped)
SND_SETTLED = 1


@dataclass(eq=False, slots=True)
class ReplyLink:
    conn: ClientConnection
    link: Link
    source: ReplySource
    queue: deque[Message] = field(default_factory=deque)


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


class AppCommands:
    def __init__(self, door: Door) -> None:
        self.door = door
        self._sinks: dict[tuple[int, str], CommandTarget] = {}
        # one command at a time per link, so a link's commands reach Kafka in the order sent
        self._order: dict[tuple[int, str], asyncio.Lock] = {}
        self._replies: dict[tuple[int, str], ReplyLink] = {}
        self._routes: dict[str, tuple[ReplySource, float]] = {}
        self._tags = itertools.count(1)
        self._client: CommandClient | None = None
        self._follower: ReplyFollower | None = None
        self._status_follower: ReplyFollower | None = None
        self._follower_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for follower in (self._follower, self._status_follower):
            if follower is not None:
                follower.close()
        if self._client is not None:
            await asyncio.to_thread(self._client.close)

    # --- links ------------------------------------------------------------------------------

    def open_sink(self, conn: ClientConnection, link: Link, target: CommandTarget) -> None:
        self._sinks[_key(conn, link)] = target
        self._order[_key(conn, link)] = asyncio.Lock()
        link.max_message_size = self.door.cfg.max_message_bytes
        link.flow(self.door.cfg.link_credit)

    def open_replies(self, conn: ClientConnection, link: Link, source: ReplySource) -> None:
        self._replies[_key(conn, link)] = ReplyLink(conn, link, source)
        self._spawn(self._follow())

    def on_flow(self, conn: ClientConnection, link: Link) -> None:
        rl = self._replies.get(_key(conn, link))
        if rl is not None:
            self._pump_replies(rl)

    def on_disposition(self, conn: ClientConnection, dlv: Delivery, key: tuple[int, str]) -> bool:
        """An application settled a reply (at most once: nothing is sent again)."""
        if key not in self._replies:
            return False
        dlv.settle()
        return True

    def detached(self, conn: ClientConnection, link: Link) -> None:
        self._sinks.pop(_key(conn, link), None)
        self._order.pop(_key(conn, link), None)
        self._replies.pop(_key(conn, link), None)

    def forget(self, conn: ClientConnection) -> None:
        for key in [k for k in self._sinks if k[0] == id(conn)]:
            del self._sinks[key]
            self._order.pop(key, None)
        for key in [k for k in self._replies if k[0] == id(conn)]:
            del self._replies[key]

    # --- commands ---------------------------------------------------------------------------

    def takes(self, conn: ClientConnection, link: Link) -> bool:
        """The link is an application's ``command/{tenant}`` sender link."""
        return _key(conn, link) in self._sinks

    def on_command(self, conn: ClientConnection, link: Link, dlv: Delivery, msg: Message) -> None:
        target = self._sinks[_key(conn, link)]
        found = parse_command(
            target, to=msg.address, subject=msg.subject, correlation_id=msg.correlation_id,
            message_id=msg.id, reply_to=msg.reply_to, body=msg.body, ttl_s=msg.ttl,
        )  # fmt: skip
        if isinstance(found, Refusal):
            self.door.stats.north_commands.labels(str(found.condition)).inc()
            if not dlv.settled:
                dlv.local.condition = condition_of(found)
                dlv.update(Delivery.REJECTED)
            dlv.settle()
            link.flow(1)
            return
        presettled = bool(dlv.settled)
        if presettled:
            dlv.settle()
        order = self._order[_key(conn, link)]
        self._spawn(self._command(conn, link, None if presettled else dlv, found, order))

    async def _command(
        self,
        conn: ClientConnection,
        link: Link,
        dlv: Delivery | None,
        cmd: AppCommand,
        order: asyncio.Lock,
    ) -> None:
        async with order:  # asyncio's locks are fair: the link's commands keep their order
            refusal = await self._unknown_device(cmd)
            if refusal is not None:
                self._refused(conn, link, dlv, refusal)
                return
            if cmd.reply is not None:
                await self._follow()
                expiry = (cmd.ttl_ms / 1000 if cmd.ttl_ms else _ROUTE_S) + time.monotonic() + 60
                self._routes[cmd.command_id] = (cmd.reply, expiry)
                self._expire_routes()
            ok = await asyncio.to_thread(self._write_command, cmd)
        self.door.stats.north_commands.labels("accepted" if ok else "released").inc()
        if conn.closed or not link.state & Endpoint.LOCAL_ACTIVE:
            return
        if dlv is not None:
            dlv.update(Delivery.ACCEPTED if ok else Delivery.RELEASED)
            dlv.settle()
        link.flow(1)
        conn.flush_soon()

    async def _unknown_device(self, cmd: AppCommand) -> Refusal | None:
        """``amqp:not-found`` for a device the registry does not hold (or holds disabled) in
        the tenant, read past every change made before the command (the read barrier), so the
        application learns it now rather than from a command that waits out its TTL. Without
        authentication, or when the registry does not answer, the command path decides."""
        auth = self.door.logins.auth
        if auth is None or cmd.device.startswith("group:"):
            return None
        try:
            await auth.synced()
        except ApiError:
            return None
        device = auth.registry.state.devices.get((cmd.tenant, cmd.device))
        if device is not None and not device.disabled:
            return None
        return Refusal(
            Cond.NOT_FOUND,
            f"no enabled device {cmd.device!r} in tenant {cmd.tenant!r}",
            {"code": "unknown_device"},
        )

    def _refused(
        self, conn: ClientConnection, link: Link, dlv: Delivery | None, refusal: Refusal
    ) -> None:
        """The rejected outcome with the refusal's condition (a presettled command has no
        outcome to carry it: it is only counted and logged)."""
        self.door.stats.north_commands.labels(str(refusal.condition)).inc()
        log.info("command refused: %s", refusal.description)
        if conn.closed or not link.state & Endpoint.LOCAL_ACTIVE:
            return
        if dlv is not None:
            dlv.local.condition = condition_of(refusal)
            dlv.update(Delivery.REJECTED)
            dlv.settle()
        link.flow(1)
        conn.flush_soon()

    def _write_command(self, cmd: AppCommand) -> bool:
        """Blocking: the ``iot.commands`` record, written by the command path's client."""
        if self._client is None:
            cfg = self.door.cfg
            self._client = CommandClient(
                cfg.kafka_bootstrap, topic_commands=cfg.topic_commands,
                topic_replies=cfg.topic_command_replies, extra=client_base(cfg.kafka_bootstrap),
            )  # fmt: skip
        try:
            self._client.send(
                cmd.device, cmd.name, cmd.args, command_id=cmd.command_id,
                reply_expected=cmd.reply is not None, ttl_ms=cmd.ttl_ms,
                tenant=None if cmd.tenant == DEFAULT_TENANT else cmd.tenant,
            )  # fmt: skip
        except CommandPathError as exc:
            log.warning("command %s not written: %s", cmd.command_id, exc)
            # the client keeps a failure for good (it is iot-cmd's, one-shot): a fresh one next
            failed, self._client = self._client, None
            failed.close()
            return False
        return True

    def _expire_routes(self) -> None:
        if len(self._routes) < 1000:
            return
        now = time.monotonic()
        for cid in [c for c, (_s, expiry) in self._routes.items() if expiry < now]:
            del self._routes[cid]

    # --- replies ----------------------------------------------------------------------------

    async def _follow(self) -> None:
        """The replies, and the statuses (for a command the command path rejects), are
        followed from now on (started once, at the first need)."""
        async with self._follower_lock:
            if self._follower is None:
                cfg = self.door.cfg
                stats = self.door.stats

                def renewed() -> None:
                    stats.renewed("replies")

                statuses = ReplyFollower(cfg.kafka_bootstrap, cfg.topic_command_status,
                                         self._status, stall_s=cfg.kafka_consumer_stall_s,
                                         on_renewed=renewed)  # fmt: skip
                stats.watched("replies", statuses.stall)
                await asyncio.to_thread(statuses.start)
                self._status_follower = statuses
                follower = ReplyFollower(cfg.kafka_bootstrap, cfg.topic_command_replies,
                                         self._reply, stall_s=cfg.kafka_consumer_stall_s,
                                         on_renewed=renewed)  # fmt: skip
                stats.watched("replies", follower.stall)
                await asyncio.to_thread(follower.start)
                self._follower = follower

    def _status(self, doc: dict[str, Any]) -> None:
        """A command the command path took from Kafka and then refused (status ``rejected``,
        e.g. ``oversized`` against its own limit): its accepted delivery cannot carry that any
        more, so the application's reply link gets a 400 with the reason, as for an invalid
        reply (docs/amqp.md)."""
        if doc.get("state") != "rejected":
            return
        detail = str(doc.get("detail") or "rejected by the command path")
        self._reply(doc, (400, detail.encode(), "text/plain"))

    def _reply(self, doc: dict[str, Any], answer: tuple[int, bytes, str] | None = None) -> None:
        route = self._routes.get(str(doc.get("command_id")))
        if route is None:
            return  # another instance's command, or an application's own iot-cmd
        source = route[0]
        links = [rl for rl in self._replies.values() if rl.source == source]
        if not links:
            self.door.stats.north_commands.labels("reply_dropped").inc()
            return
        status, body, content_type = answer or reply_message(doc)
        msg = Message(
            correlation_id=doc.get("command_id"),
            creation_time=time.time(),
            content_type=content_type,
            properties={
                "device_id": str(doc.get("device_id")),
                "tenant_id": source.tenant,
                "status": int32(status),
            },
            body=body,
            inferred=True,
        )
        target = max(links, key=lambda rl: rl.link.credit)
        if len(target.queue) >= _REPLY_QUEUE:
            self.door.stats.north_commands.labels("reply_dropped").inc()
            return
        target.queue.append(msg)
        self._pump_replies(target)

    def _pump_replies(self, rl: ReplyLink) -> None:
        link = rl.link
        if rl.conn.closed or not link.state & Endpoint.LOCAL_ACTIVE:
            return
        while link.credit > 0 and rl.queue:
            dlv = link.delivery(str(next(self._tags)))
            link.send(rl.queue.popleft().encode())
            link.advance()
            if int(link.snd_settle_mode) == SND_SETTLED:
                dlv.settle()
            self.door.stats.north_commands.labels("reply_sent").inc()
        if link.drain_mode and not rl.queue:
            link.drained()
        rl.conn.flush_soon()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
