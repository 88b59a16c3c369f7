"""`ReplyAcks`: when the replies of the reply connection may be PUBACKed.

A reply is PUBACKed only once every Kafka write it caused (its reply record, the status it
moved) is acknowledged, and PUBACKs leave in arrival order. Pure: the service sends them.
"""

from __future__ import annotations

import logging

from commands.ordered_completion import OrderedCompletion

__all__ = ["ReplyAcks"]

log = logging.getLogger(__name__)


class ReplyAcks:
    """The replies of connection ``generation`` waiting for their Kafka writes."""

    def __init__(self) -> None:
        self._acks: OrderedCompletion[int] = OrderedCompletion()
        self._waits: dict[int, int] = {}
        self.generation = 0

    def new_connection(self, generation: int) -> None:
        """PUBACKs owed on the previous reply connection are never sent on this one."""
        self._acks = OrderedCompletion()
        self._waits = {}
        self.generation = generation

    def add(self, mid: int, writes: int = 1) -> None:
        """Reply ``mid`` arrived; it may be PUBACKed after ``writes`` calls of :meth:`done`."""
        try:
            self._acks.add(mid)
        except ValueError:
            # the packet id is still waiting from before a wrap-around: start afresh
            log.warning("reply packet id %d reused while pending; acknowledging in new order", mid)
            self._acks = OrderedCompletion()
            self._waits = {}
            self._acks.add(mid)
        self._waits[mid] = writes

    def done(self, generation: int, mid: int) -> list[int]:
        """One write of reply ``mid`` is acknowledged: the packet ids now due a PUBACK."""
        if generation != self.generation:
            return []  # acknowledged by nobody: Mosquitto redelivers it on the new connection
        left = self._waits.get(mid, 1) - 1
        if left > 0:
            self._waits[mid] = left
            return []
        self._waits.pop(mid, None)
        return self._acks.complete(mid)
