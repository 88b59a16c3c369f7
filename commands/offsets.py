"""`CommandOffsets`: the ``iot.commands`` partitions this instance owns and their offsets.

An offset is stored only once its command is done (its ``sent``, ``rejected`` or ``expired``
status acknowledged by Kafka), in offset order per partition: at-least-once. Pure: the
service stores what :meth:`CommandOffsets.done` returns.
"""

from __future__ import annotations

import logging

from bridge.partitioner import partition_for
from commands.model import Source
from commands.ordered_completion import OrderedCompletion

__all__ = ["CommandOffsets"]

log = logging.getLogger(__name__)


class CommandOffsets:
    """Offsets read per partition and not yet done; which partitions are ours."""

    def __init__(self) -> None:
        self._pending: dict[int, OrderedCompletion[int]] = {}
        # iot.commands partitions this instance owns, and how many the topic has: a reply
        # from a device of another instance's partition is that instance's business
        self.assigned: set[int] = set()
        self.partition_count = 0

    def assign(self, partitions: set[int]) -> None:
        self.assigned |= partitions
        for p in partitions:
            self._pending.setdefault(p, OrderedCompletion())

    def revoke(self, partitions: set[int]) -> None:
        self.assigned -= partitions
        for p in partitions:
            self._pending.pop(p, None)

    def read(self, partition: int, offset: int) -> None:
        try:
            self._pending.setdefault(partition, OrderedCompletion()).add(offset)
        except ValueError:
            log.debug("offset %d of partition %d read twice", offset, partition)

    def done(self, source: Source) -> int | None:
        """The command read at ``source`` is done: the offset to store now, if any (``None``
        also when the partition was revoked meanwhile: the new owner reads it again)."""
        pending = self._pending.get(source.partition)
        if pending is None:
            return None
        done = pending.complete(source.offset)
        return done[-1] + 1 if done else None

    def owns_device(self, device_id: str) -> bool:
        """Whether ``device_id``'s commands partition is ours (True while the partition count
        is unknown, so that nothing goes unrecorded)."""
        if not self.partition_count:
            return True
        return partition_for(device_id.encode(), self.partition_count) in self.assigned
