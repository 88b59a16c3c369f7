"""The in-order acknowledgement window (pure; no client imports).

Every message the bridge takes joins a :class:`Group` (the consecutive messages of one socket
read that go to the same kind of topic), and groups are appended here in arrival order. Kafka
confirms records per partition, so confirmations arrive out of arrival order;
:meth:`AckWindow.pop_done` releases only the confirmed *prefix*, which is what makes PUBACKs
go out in arrival order (MQTT 5 4.6). Grouping keeps the per-message work to a few list and
int operations: no object, report or histogram lookup per message.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

# the time of the producer poll now serving delivery callbacks (set by the pipeline before each
# poll: one clock read per poll instead of one per message); > 0 from the start
_clock = [time.monotonic()]


def set_clock(now: float) -> None:
    _clock[0] = now


class Group:
    """Consecutive messages of one socket read that go to the same kind of Kafka topic: the
    window's unit, acknowledged together (their packet ids in arrival order). ``pending``
    counts the delivery reports still to come: one per partition marker whose segment holds
    some of its records, one per record produced with a report of its own. When it reaches 0,
    ``done_at`` is that poll's time (always > 0; 0.0 until then) and ``error`` the first
    failure, if any. ``sent_at`` is when the read came (monotonic)."""

    __slots__ = (
        "count",
        "done_at",
        "error",
        "generation",
        "packet_ids",
        "pending",
        "sent_at",
        "size",
        "topic",
    )

    def __init__(self, generation: int, topic: str, sent_at: float) -> None:
        self.packet_ids: list[int] = []  # QoS 0 messages (packet id 0) have none
        self.count = 0
        self.size = 0
        self.generation = generation
        self.topic = topic
        self.sent_at = sent_at
        self.pending = 0
        self.done_at = 0.0
        self.error: Any = None

    def delivered(self, error: Any, _msg: Any = None) -> None:
        """One report that covers records of this group (a record's own or a marker's)."""
        if error is not None and self.error is None:
            self.error = error
        self.pending -= 1
        if not self.pending:
            self.done_at = _clock[0]


class AckWindow:
    """Pending groups in arrival order, with the message counts for the back-pressure bound
    (the pipeline adds each message's count and bytes itself: no call per message)."""

    def __init__(self) -> None:
        self._groups: deque[Group] = deque()
        self.count = 0
        self.bytes = 0
        self.high_water_count = 0
        self.high_water_bytes = 0

    def __len__(self) -> int:
        return self.count

    def add(self, group: Group) -> None:
        self._groups.append(group)

    def note_high_water(self) -> None:
        """Update the high-water marks (once per socket read)."""
        if self.count > self.high_water_count:  # noqa: PLR1730 - max() is slower
            self.high_water_count = self.count
        if self.bytes > self.high_water_bytes:  # noqa: PLR1730
            self.high_water_bytes = self.bytes

    def pop_done(self) -> list[Group]:
        """Remove and return the longest prefix of confirmed groups (ok or failed)."""
        groups = self._groups
        out: list[Group] = []
        count = size = 0
        while groups and groups[0].done_at:
            g = groups.popleft()
            count += g.count
            size += g.size
            out.append(g)
        self.count -= count
        self.bytes -= size
        return out

    def oldest_age(self) -> float:
        """Seconds the oldest pending message has waited (0 if none)."""
        if not self._groups:
            return 0.0
        return time.monotonic() - self._groups[0].sent_at


class Segment:
    """The records of one Kafka partition produced without a delivery report of their own,
    and the marker: the last of them, the only one produced with a report (:meth:`delivered`).
    ``groups`` are the groups those records belong to.

    The idempotent producer with ``enable.gapless.guarantee`` and no message timeout writes a
    partition's messages in produce order and never skips one (a failure that would leave a
    gap is a fatal error that fails every queued message). So the marker's success means every
    record produced before it on that partition is in Kafka, and its failure is theirs too
    (at-least-once: they are not acknowledged, Mosquitto redelivers them)."""

    __slots__ = ("groups",)

    def __init__(self, groups: list[Group]) -> None:
        self.groups = groups

    def delivered(self, error: Any, _msg: Any = None) -> None:
        for g in self.groups:
            g.delivered(error)


class PartitionQueue:
    """The sparse-report state of one Kafka partition: ``held`` is its newest record (key,
    value, headers), not yet produced (it becomes the marker unless a newer one arrives before
    the end of the socket read); ``groups`` are the groups of the records of the open segment
    (the produced ones and the held one)."""

    __slots__ = ("groups", "held", "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.held: tuple[bytes | None, bytes, list[tuple[str, bytes]]] | None = None
        self.groups: list[Group] = []

    def join(self, group: Group) -> None:
        """A record of ``group`` joins the open segment."""
        groups = self.groups
        if not groups or groups[-1] is not group:
            groups.append(group)
            group.pending += 1

    def close_segment(self) -> Segment:
        """The open segment, for its marker; a new one opens."""
        segment = Segment(self.groups)
        self.groups = []
        return segment
