"""Commands to AMQP devices and their replies (service), the HTTP door's model reused: one
persistent MQTT 5 session per device (api.http_devices.mqtt, client id ``iot-amqp/<user
name>``, as iot-api's ``iot-api/<user name>``), subscribed to the device's command topics with
the service's account (role ``api``). The command path is unchanged: it publishes to the
device's topic and Mosquitto keeps commands for the session while the device is away.

- While a device's ``command`` link is attached, commands read from its session are sent on it,
  one per unit of credit the device gives, unsettled (amqp.command_model for the message).
- The device's disposition decides: ``accepted`` -> PUBACK (Mosquitto forgets it: the command
  path sees ``delivered``); ``rejected`` -> PUBACK too, never sent again (the command ends
  by the command path's reply timeout, as one an MQTT device ignores; a device that wants it
  ``failed`` at once replies ``{"status": "error"}``); ``released`` / ``modified`` -> kept,
  sent again after :data:`RETRY_S`. A link or connection gone with commands unsettled: they
  are kept for the next attach (or, should the session drop, Mosquitto sends them again).
- One command link per device: a newer attach takes over and the older link is detached with
  ``amqp:link:stolen`` (Hono users' devices got no commands after a reconnect when the stale
  link won).
- Replies (on the device's sender link, to the ``reply-to`` given) are published as the
  device's MQTT reply: ``accepted`` once Mosquitto acknowledged it, ``released`` when it did
  not (no command path subscribed, Mosquitto away; resend).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message

from amqp.command_model import Reply, command_message
from amqp.model import Cond, Refusal
from api.http_devices.model import DeviceRef, reply_topic
from api.http_devices.mqtt import DeviceLink, DeviceLinkError, DeviceLinks, Held, MqttSettings

if TYPE_CHECKING:
    from amqp.connection import ClientConnection
    from amqp.service import Door

log = logging.getLogger(__name__)
RETRY_S = 1.0  # a released command is sent again after this long
_TAKE_S = 5.0  # how long one wait for a command lasts before the link is looked at again
_RECONNECT_S = 2.0  # after Mosquitto refused or dropped the device's session


@dataclass(eq=False, slots=True)
class CommandLink:
    """A device's attached ``command`` link."""

    conn: ClientConnection
    link: Link
    device: DeviceRef
    credit: asyncio.Event = field(default_factory=asyncio.Event)
    unsettled: dict[bytes, Held] = field(default_factory=dict)
    session: DeviceLink | None = None
    task: asyncio.Task[None] | None = None
    active: bool = True

    @property
    def open(self) -> bool:
        return (
            self.active and not self.conn.closed and bool(self.link.state & Endpoint.LOCAL_ACTIVE)
        )


def _key(conn: ClientConnection, link: Link) -> tuple[int, str]:
    return (id(conn), link.name)


def _tag(dlv: Delivery) -> bytes:
    tag = dlv.tag
    return tag.encode() if isinstance(tag, str) else bytes(tag)


class Commands:
    def __init__(self, door: Door) -> None:
        self.door = door
        cfg = door.cfg
        self.sessions = DeviceLinks(
            MqttSettings(
                cfg.mqtt_host,
                cfg.mqtt_port,
                cfg.mqtt_username,
                cfg.mqtt_secret(),
                cfg.device_session_expiry_s,
                client_prefix="iot-amqp",
            ),
            cfg.device_session_idle_s,
        )
        self._by_device: dict[DeviceRef, CommandLink] = {}
        self._by_link: dict[tuple[int, str], CommandLink] = {}
        self._tags = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.sessions.start()

    async def close(self) -> None:
        for cl in list(self._by_link.values()):
            self._end(cl)
        for task in list(self._tasks):
            task.cancel()
        await self.sessions.close()

    def _groups(self, ref: DeviceRef) -> tuple[str, ...]:
        auth = self.door.logins.auth
        if auth is None:
            return ()
        device = auth.registry.state.devices.get((ref.tenant, ref.device))
        return tuple(sorted(device.groups)) if device is not None else ()

    def ready(self, device: DeviceRef) -> bool:
        """The device has a command link whose MQTT session is subscribed (commands sent now
        reach it)."""
        cl = self._by_device.get(device)
        return cl is not None and cl.session is not None and cl.session.connected

    # --- the command link -------------------------------------------------------------------

    def attach(self, conn: ClientConnection, link: Link, device: DeviceRef) -> None:
        """The link is open: take over the device's older link, start sending."""
        older = self._by_device.get(device)
        if older is not None:
            was_open = older.open
            self._end(older)
            if was_open:
                older.conn.detach(
                    older.link, Refusal(Cond.LINK_STOLEN, "a newer command link took over")
                )
                older.conn.flush_soon()
        cl = CommandLink(conn, link, device)
        self._by_device[device] = cl
        self._by_link[_key(conn, link)] = cl
        cl.task = asyncio.get_running_loop().create_task(self._pump(cl))
        self.door.stats.command_links.inc()

    def on_flow(self, conn: ClientConnection, link: Link) -> None:
        cl = self._by_link.get(_key(conn, link))
        if cl is not None and link.credit > 0:
            cl.credit.set()

    def detached(self, conn: ClientConnection, link: Link) -> None:
        cl = self._by_link.get(_key(conn, link))
        if cl is not None:
            self._end(cl)

    def forget(self, conn: ClientConnection) -> None:
        for cl in [c for c in self._by_link.values() if c.conn is conn]:
            self._end(cl)

    def _end(self, cl: CommandLink) -> None:
        """The link is gone (or taken over): its unsettled commands are kept for the next one."""
        if not cl.active:
            return
        cl.active = False
        self._by_link.pop(_key(cl.conn, cl.link), None)
        if self._by_device.get(cl.device) is cl:
            del self._by_device[cl.device]
        if cl.task is not None:
            cl.task.cancel()
        if cl.session is not None:  # the oldest first again (give_back puts each in front)
            for held in reversed(list(cl.unsettled.values())):
                cl.session.give_back(held)
        cl.unsettled.clear()
        self.door.stats.command_links.dec()

    async def _pump(self, cl: CommandLink) -> None:
        """Send the device's commands while the link is open and has credit."""
        while cl.open:
            try:
                session = await self.sessions.get(cl.device, self._groups(cl.device))
            except (DeviceLinkError, OSError) as exc:
                log.warning("no MQTT session for AMQP device %s: %s", cl.device.username, exc)
                await asyncio.sleep(_RECONNECT_S)
                continue
            cl.session = session
            session.waiters += 1  # never closed as idle while the link is attached
            try:
                while cl.open and session.connected:
                    if cl.link.credit <= 0:
                        cl.credit.clear()
                        await cl.credit.wait()
                        continue
                    held = await session.take(_TAKE_S)
                    if held is None:
                        continue
                    if not cl.open:
                        session.give_back(held)
                        return
                    self._send(cl, held)
            finally:
                session.waiters -= 1
                session.last_used = time.monotonic()

    def _send(self, cl: CommandLink, held: Held) -> None:
        built = command_message(cl.device, held.command)
        msg = Message(
            subject=built.subject,
            correlation_id=built.correlation_id,
            reply_to=built.reply_to,
            content_type=built.content_type,
            properties=built.properties,
            body=built.body,
            inferred=True,
        )
        tag = str(next(self._tags))
        cl.link.delivery(tag)
        cl.link.send(msg.encode())
        cl.link.advance()
        cl.unsettled[tag.encode()] = held
        self.door.stats.commands.labels("sent").inc()
        cl.conn.flush_soon()

    def on_disposition(self, conn: ClientConnection, dlv: Delivery, key: tuple[int, str]) -> None:
        """The device settled a command (a DELIVERY event on a command link; ``key``: the
        link's)."""
        cl = self._by_link.get(key)
        if cl is None or not (dlv.settled or dlv.remote_state):  # settled: the peer's flag
            return
        held = cl.unsettled.pop(_tag(dlv), None)
        state = dlv.remote_state
        cond = dlv.remote.condition  # read before settle(): that may free the delivery
        text = cond.description if cond is not None and cond.description else ""
        dlv.settle()
        if held is None or cl.session is None:
            return
        if state == Delivery.ACCEPTED:
            cl.session.ack(held)
            self.door.stats.commands.labels("accepted").inc()
        elif state == Delivery.REJECTED:  # it will not run it: never sent again
            log.info("%s rejected command %s: %s", cl.device.username,
                     held.command.command_id, text or "-")  # fmt: skip
            cl.session.ack(held)
            self.door.stats.commands.labels("rejected").inc()
        else:  # released, modified, or settled with no outcome: sent again a little later
            session = cl.session
            asyncio.get_running_loop().call_later(RETRY_S, session.give_back, held)
            self.door.stats.commands.labels("released").inc()

    # --- replies ----------------------------------------------------------------------------

    def reply(self, conn: ClientConnection, link: Link, dlv: Delivery, reply: Reply) -> None:
        """Publish a device's reply; settle its transfer when Mosquitto answered."""
        presettled = bool(dlv.settled)
        if presettled:  # at most once
            dlv.settle()
        self._spawn(self._answer(conn, link, None if presettled else dlv, reply))

    async def _answer(
        self, conn: ClientConnection, link: Link, dlv: Delivery | None, reply: Reply
    ) -> None:
        ok = await self._publish(reply.device, reply.command_id, reply.payload)
        self.door.stats.replies.labels("accepted" if ok else "released").inc()
        if conn.closed or not link.state & Endpoint.LOCAL_ACTIVE:
            return  # never touch a detached link's deliveries (amqp.uploads.on_delivery)
        if dlv is not None:
            dlv.update(Delivery.ACCEPTED if ok else Delivery.RELEASED)
            dlv.settle()
        link.flow(1)
        conn.flush_soon()

    async def _publish(self, device: DeviceRef, command_id: str, payload: bytes) -> bool:
        """The device's MQTT reply, QoS 1: True once Mosquitto took it for a subscriber."""
        try:
            session = await self.sessions.get(device, self._groups(device))
            reason = await session.publish(reply_topic(device, command_id), payload)
        except (DeviceLinkError, OSError) as exc:
            log.warning("reply of %s not published: %s", device.username, exc)
            return False
        if reason == 0x10 or reason >= 0x80:  # no subscriber (no command path), or refused
            log.warning("reply of %s not taken by Mosquitto: 0x%02x", device.username, reason)
            return False
        return True

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
