"""When a long-lived consumer's fetch has wedged: records wait for it and it gets none (issue 32).

A consumer whose fetch wedges (after a Kafka kill -9 and restart, or with its partition's leader
silent) raises no error and still answers metadata: it just receives nothing. What gives it away
is Kafka's side: a partition's high watermark, read with a bounded wait, stays ahead of the
consumer's position while that position does not move. Pure: the caller reads both and the
clock decides; it drops the consumer and makes a new one at its positions when :meth:`check`
says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)  # a partition


class FetchStall(Generic[K]):
    """Stalled: for ``stall_s`` seconds or more, some partition's high watermark was ahead of
    the consumer's position, and no position moved."""

    def __init__(self, stall_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self._clock = clock
        self._positions: dict[K, int] = {}
        self._behind_since: float | None = None

    @property
    def behind(self) -> bool:
        """At the last check, records were waiting and none had arrived since the one before."""
        return self._behind_since is not None

    def check(self, positions: Mapping[K, int], highs: Mapping[K, int]) -> bool:
        """``positions``: each assigned partition's next offset to read; ``highs``: its high
        watermark now (a partition missing from ``highs`` was not read: not behind)."""
        now = self._clock()
        moved = dict(positions) != self._positions
        self._positions = dict(positions)
        waiting = any(highs.get(key, at) > at for key, at in positions.items())
        if not waiting:
            self._behind_since = None
        elif moved or self._behind_since is None:
            self._behind_since = now  # records arrived since the last check: it fetches
        return self._behind_since is not None and now - self._behind_since >= self.stall_s

    def reset(self) -> None:
        """A new consumer: nothing held against it yet."""
        self._positions = {}
        self._behind_since = None
