"""`LinkPool`: the command path's MQTT connections, one receiving replies, several publishing.

Why a pool: Mosquitto 2.0 reads ONE packet per connection per pass of its
event loop (``packet__read`` in lib/packet_mosq.c). Under telemetry load a pass over a
thousand busy device connections takes milliseconds, so a single connection carrying a
thousand commands a second queued them in Mosquitto's socket buffer for hundreds of
milliseconds (measured: sent -> PUBACK p99 370 ms at 25k telemetry msgs/s). Commands are
therefore published over several connections, a device always on the same one (its commands
stay in order); the replies arrive on the persistent one.
"""

from __future__ import annotations

import logging
import select
import time
import zlib

from bridge.mqtt_settings import mqtt_session_settings
from commands.config import CommandConfig
from commands.mapping import REPLY_SUBSCRIPTIONS
from commands.model import CommandPathError
from commands.mqtt_link import CommandLink, LinkEvent, LinkLostError, Puback

__all__ = ["LinkPool", "connect_pool"]

log = logging.getLogger(__name__)


class LinkPool:
    """The command path's connections: link 0 (persistent session) receives the replies and
    carries their PUBACKs; links 1..N (clean sessions) publish the commands, a target always
    on the same link. With ``publishers=0`` link 0 publishes too.

    Packet ids of publishes are made unique across the pool (``link * 65536 + packet id``).
    A lost link is reconnected with exponential backoff inside :meth:`poll`; what it had
    unacknowledged is sent again then.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        client_id: str,
        subscription: str | tuple[str, ...],
        keepalive: int,
        session_expiry: int,
        receive_maximum: int,
        publishers: int,
        username: str = "",
        password: str = "",
        reconnect_min_s: float = 0.5,
        reconnect_max_s: float = 30.0,
    ) -> None:
        def link(index: int) -> CommandLink:
            return CommandLink(
                host=host,
                port=port,
                client_id=client_id if index == 0 else f"{client_id}-p{index}",
                subscription=subscription if index == 0 else None,
                keepalive=keepalive,
                session_expiry=session_expiry if index == 0 else 0,
                receive_maximum=receive_maximum,
                username=username,
                password=password,
                clean_start=index != 0,
                index=index,
            )

        self.links = [link(i) for i in range(publishers + 1)]
        self.publishers = publishers
        self.reconnect_min_s = reconnect_min_s
        self.reconnect_max_s = reconnect_max_s
        # link index -> (monotonic time of the next attempt, current delay)
        self._retry: dict[int, tuple[float, float]] = {}

    @property
    def connected(self) -> bool:
        """Whether the reply connection is up."""
        return self.links[0].connected

    @property
    def generation(self) -> int:
        """The reply connection's generation (what :meth:`ack` compares)."""
        return self.links[0].generation

    def connect(self) -> list[LinkEvent]:
        """Connect every link (at start: a failure raises)."""
        events: list[LinkEvent] = []
        for link in self.links:
            events += link.connect()
        return events

    def close(self) -> None:
        for link in self.links:
            link.close()

    def publish(self, key: str, topic: str, payload: bytes, properties: bytes) -> int:
        """Queue a command for ``key`` (device id or group key) on its link; a pool-wide id."""
        index = 0
        if self.publishers:
            index = 1 + zlib.crc32(key.encode()) % self.publishers
        return index * 65536 + self.links[index].publish(topic, payload, properties)

    def ack(self, mids: list[int], generation: int) -> None:
        self.links[0].ack(mids, generation)

    def flush(self) -> None:
        for i, link in enumerate(self.links):
            try:
                link.flush()
            except (OSError, LinkLostError) as exc:
                self._down(i, str(exc))

    def poll(self, timeout: float) -> list[LinkEvent]:
        """Flush every link, wait up to ``timeout``, return the events of every link
        (``Puback`` ids pool-wide). Reconnects the links whose retry time has come."""
        for link in self.links:
            if not link.connected:
                self._down(link.index, "not connected")
        events = self._reconnect_due()
        self.flush()
        # publishing links first, the reply link last: Mosquitto PUBACKs a command before it
        # forwards it, so reading in this order sees a command's PUBACK before its reply
        socks = {link.fileno(): link for link in reversed(self.links) if link.connected}
        if events:
            timeout = 0.0
        if not socks:
            time.sleep(timeout)
            return events
        ready, _, _ = select.select(list(socks), (), (), timeout)
        now = time.monotonic()
        for fd in ready:
            link = socks[fd]
            try:
                got = link.read()
            except (OSError, LinkLostError) as exc:
                self._down(link.index, str(exc))
                continue
            if link.index:
                got = [
                    Puback(link.index * 65536 + e.mid, e.reason) if isinstance(e, Puback) else e
                    for e in got
                ]
            events += got
        for link in self.links:
            try:
                link.keep_alive(now)
            except (OSError, LinkLostError) as exc:
                self._down(link.index, str(exc))
        return events

    def _down(self, index: int, why: str) -> None:
        if index in self._retry:
            return
        delay = self.reconnect_min_s
        log.warning(
            "command path MQTT connection %d lost (%s); reconnecting in %.1fs", index, why, delay
        )
        self._retry[index] = (time.monotonic() + delay, delay)

    def _reconnect_due(self) -> list[LinkEvent]:
        events: list[LinkEvent] = []
        now = time.monotonic()
        for index, (at, delay) in list(self._retry.items()):
            if now < at:
                continue
            link = self.links[index]
            try:
                got = link.connect()
            except (OSError, LinkLostError) as exc:
                backoff = min(delay * 2, self.reconnect_max_s)
                log.warning(
                    "command path MQTT connection %d: reconnect failed (%s); next in %.1fs",
                    index,
                    exc,
                    backoff,
                )
                self._retry[index] = (now + backoff, backoff)
                continue
            del self._retry[index]
            events += got
        return events


def connect_pool(cfg: CommandConfig) -> tuple[LinkPool, list[LinkEvent]]:
    """The command path's pool, connected; and the events of its first connections."""
    link = LinkPool(
        client_id=cfg.command_mqtt_client_id,
        subscription=REPLY_SUBSCRIPTIONS,
        publishers=cfg.command_mqtt_publishers,
        **mqtt_session_settings(cfg),
    )
    try:
        events = link.connect()
    except (OSError, LinkLostError) as exc:
        link.close()
        raise CommandPathError(
            f"MQTT connection to {cfg.mqtt_host}:{cfg.mqtt_port} failed: {exc}"
        ) from exc
    return link, events
