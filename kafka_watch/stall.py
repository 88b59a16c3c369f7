"""Whether a long-lived Kafka consumer silently stopped receiving (issue 32): pure, no client.

A consumer that librdkafka wedges (after a Kafka restart, or on a node cut off without a
reset) raises nothing: it just fetches nothing while its partitions' high watermarks move on.
:class:`StallJudge` is shown, now and then, each assigned partition's position (the next
offset the consumer will hand out) and its high watermark as Kafka answers it now, and says
which partitions are **stalled**: left behind their high watermark (records there to read)
with a position that has not moved for ``stall_s`` seconds. A consumer that is merely idle
(its position at the high watermark: nothing new) is never stalled, however long it waits,
and one that is slowly catching up is not either (its position moves).

The position must count what no record fills: librdkafka's ``Consumer.position`` moves past a
transaction's commit marker (measured: 3 records of a committed transaction at offsets 0-2,
position 4 = the high watermark), the offset of the last record handed out + 1 does not.

The judge also counts what its owner did about it, for its service's ``/metrics`` (iot-api's
``api.plumbing.kafka_renew.RenewalCollector``, the command path's ``commands.metrics``):
``renewals`` (consumers replaced) and ``failures`` (partitions behind without progress at the
last check, 0 when it reads). Its owner asks Kafka through :mod:`kafka_watch.consumer`, or
passes positions and ends it already holds (the registry follower).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

Partition = tuple[str, int]  # (topic, partition)


class StallJudge:
    """Per partition: since when it has been behind at the same position."""

    def __init__(self, name: str, stall_s: float) -> None:
        if stall_s <= 0:
            raise ValueError("stall_s must be > 0")
        self.name = name
        self.stall_s = stall_s
        self.every_s = min(10.0, stall_s / 3)  # how often its owner checks (see due)
        self._checked_at = 0.0  # the current consumer's last check, or its assignment
        self._behind: dict[Partition, tuple[int, float]] = {}  # -> (position, since when)
        self.renewals = 0  # consumers replaced because they stalled
        self.failures = 0  # partitions behind without progress at the last check

    def check(
        self,
        now: float,
        positions: Mapping[Partition, int],
        highs: Mapping[Partition, int],
    ) -> list[Partition]:
        """The partitions stalled at ``now`` (sorted; empty: the consumer receives or idles).

        ``highs`` holds the partitions asked about (one missing from ``positions``, or with a
        negative position or high watermark, is unknown and skipped); ``now`` is a monotonic
        time in seconds, never going back."""
        behind: dict[Partition, tuple[int, float]] = {}
        for part, high in highs.items():
            position = positions.get(part, -1)
            if position < 0 or high < 0 or high <= position:
                continue  # unknown, or nothing to read: idle is no stall
            before = self._behind.get(part)
            since = before[1] if before is not None and before[0] == position else now
            behind[part] = (position, since)
        self._behind = behind
        self.failures = sum(1 for _, since in behind.values() if since < now)
        return sorted(p for p, (_, since) in behind.items() if now - since >= self.stall_s)

    def assigned(self, now: float) -> None:
        """A new consumer (a re-assignment, a retry after an error), assigned at ``now``:
        nothing held against it, its first check ``every_s`` later."""
        self.reset()
        self._checked_at = now

    def due(self, now: float) -> bool:
        """Whether the owner should check now (``every_s`` since the last check or the
        assignment); True starts the next interval."""
        if now - self._checked_at < self.every_s:
            return False
        self._checked_at = now
        return True

    def renewed(self) -> None:
        """The consumer was replaced: count it, and judge the new one afresh."""
        self.renewals += 1
        self.reset()

    def reset(self) -> None:
        """A new consumer (a re-assignment, a retry after an error): nothing held against it."""
        self._behind.clear()
        self.failures = 0


class StallTally:
    """What many consumers of one kind did (MR's consumer ids, a service's queue members), for
    ``/metrics`` under one name rather than one per consumer: ``renewals`` counted by their
    owners, ``failures`` the partitions behind without progress over the judges alive now."""

    def __init__(self, name: str, judges: Callable[[], Iterable[StallJudge]]) -> None:
        self.name = name
        self.renewals = 0
        self._judges = judges

    @property
    def failures(self) -> int:
        return sum(j.failures for j in self._judges())
