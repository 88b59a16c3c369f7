"""`CommandPublisher`: command attempts onto the MQTT link pool, within Mosquitto's limit.

At most ``limit`` publishes (Mosquitto's Receive Maximum, capped by
``command_max_inflight``) wait for their PUBACK; the rest are held, in order, and an attempt
the tracker has moved past meanwhile is not published at all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import mqtt_codec as codec
from commands.actions import PublishAction
from commands.link_pool import LinkPool
from commands.mapping import build_publish
from commands.tracker import Tracker

__all__ = ["CommandPublisher"]


class CommandPublisher:
    """Publishes ``PublishAction``s; remembers which attempt each packet id carries."""

    def __init__(
        self, tracker: Tracker, now: Callable[[], int], stats: dict[str, int], limit: int
    ) -> None:
        self.link: LinkPool | None = None
        self.limit = limit
        self._tracker = tracker
        self._now = now
        self._stats = stats
        self._mids: dict[int, tuple[str, int]] = {}
        self._held: deque[PublishAction] = deque()

    @property
    def held(self) -> int:
        return len(self._held)

    def publish(self, action: PublishAction) -> None:
        if len(self._mids) >= self.limit or self._held:
            self._held.append(action)
            return
        self._publish_now(action)

    def acked(self, mid: int) -> tuple[str, int] | None:
        """The (command id, attempt) PUBACK ``mid`` acknowledges, if one waits for it."""
        return self._mids.pop(mid, None)

    def release_held(self) -> None:
        while self._held and len(self._mids) < self.limit:
            action = self._held.popleft()
            if self._tracker.attempt_of(action.command.command_id) == action.attempt:
                self._publish_now(action)

    def _publish_now(self, action: PublishAction) -> None:
        assert self.link is not None
        pub = build_publish(action.command, action.attempt, self._now())
        if pub is None:
            return  # TTL ran out this very moment: the tracker's next tick expires it
        props = codec.publish_properties(
            correlation_data=pub.correlation_data,
            response_topic=pub.response_topic,
            message_expiry=pub.message_expiry_s,
            user_properties=pub.user_properties,
        )
        mid = self.link.publish(action.command.target.key, pub.topic, pub.payload, props)
        self._mids[mid] = (action.command.command_id, action.attempt)
        self._stats["published"] += 1
