"""The in-order acknowledgement window (pure; no client imports).

Every message the bridge takes is appended here in arrival order. Kafka confirms records per
partition, so confirmations arrive out of arrival order; :meth:`AckWindow.pop_done` releases
only the confirmed *prefix*, which is what makes PUBACKs go out in arrival order (MQTT 5 4.6).
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


class Entry:
    """One pending message. ``sent_at`` is when it was read (monotonic; the pipeline reads the
    clock once per socket read); ``delivered`` is the Kafka delivery callback (run by the
    producer poll of the pipeline's tick); ``done_at`` is that poll's time (always > 0), 0.0
    until then: the ack lag (delivery report to PUBACK) is measured from it."""

    __slots__ = ("done_at", "error", "generation", "packet_id", "sent_at", "size", "topic")

    def __init__(
        self, packet_id: int, generation: int, size: int, topic: str, sent_at: float
    ) -> None:
        self.packet_id = packet_id  # 0 = nothing to acknowledge (QoS 0)
        self.generation = generation
        self.size = size
        self.topic = topic
        self.sent_at = sent_at
        self.done_at = 0.0
        self.error: Any = None

    def delivered(self, error: Any, _msg: Any = None) -> None:
        self.error = error
        self.done_at = _clock[0]


class AckWindow:
    """Pending messages in arrival order, with counts for the back-pressure bound."""

    def __init__(self) -> None:
        self._entries: deque[Entry] = deque()
        self.count = 0
        self.bytes = 0
        self.high_water_count = 0
        self.high_water_bytes = 0

    def __len__(self) -> int:
        return self.count

    def add(self, entry: Entry) -> None:
        self._entries.append(entry)
        self.count += 1
        self.bytes += entry.size
        if self.count > self.high_water_count:  # noqa: PLR1730 - hot path, max() is slower
            self.high_water_count = self.count
        if self.bytes > self.high_water_bytes:  # noqa: PLR1730
            self.high_water_bytes = self.bytes

    def pop_done(self) -> list[Entry]:
        """Remove and return the longest prefix of confirmed entries (ok or failed)."""
        entries = self._entries
        out: list[Entry] = []
        size = 0
        while entries and entries[0].done_at:
            e = entries.popleft()
            size += e.size
            out.append(e)
        self.count -= len(out)
        self.bytes -= size
        return out

    def oldest_age(self) -> float:
        """Seconds the oldest pending message has waited (0 if none)."""
        if not self._entries:
            return 0.0
        return time.monotonic() - self._entries[0].sent_at


class Segment:
    """Entries of one Kafka partition produced without a delivery report of their own, and the
    marker: the last of them, the only one produced with a report (:meth:`delivered`).

    The idempotent producer with ``enable.gapless.guarantee`` and no message timeout writes a
    partition's messages in produce order and never skips one (a failure that would leave a
    gap is a fatal error that fails every queued message). So the marker's success means every
    entry produced before it on that partition is in Kafka, and its failure is theirs too
    (at-least-once: they are not acknowledged, Mosquitto redelivers them)."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    def delivered(self, error: Any, _msg: Any = None) -> None:
        now = _clock[0]
        for e in self.entries:
            e.error = error
            e.done_at = now


class PartitionQueue:
    """The sparse-report state of one Kafka partition: ``held`` is its newest message, not yet
    produced (it becomes the marker unless a newer one arrives before the end of the socket
    read); ``segment`` holds the entries produced since the last marker."""

    __slots__ = ("held", "partition", "segment", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.held: tuple[bytes | None, bytes, list[tuple[str, bytes]], Entry] | None = None
        self.segment: list[Entry] = []

    def close_segment(self, last: Entry) -> Segment:
        """The marker's segment: everything since the last marker, then ``last``."""
        entries = self.segment
        entries.append(last)
        self.segment = []
        return Segment(entries)
