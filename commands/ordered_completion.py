"""`OrderedCompletion`: tokens that complete in any order, released in the order added.

Pure; the command service keeps one per ``iot.commands`` partition (offsets) and one for the
replies of the current MQTT connection (PUBACKs).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["OrderedCompletion"]

T = TypeVar("T", bound=Hashable)


class OrderedCompletion(Generic[T]):
    """Tokens complete in any order but are released in the order they were added.

    Used for consumer offsets (commit the done prefix of a partition) and for MQTT acks of
    replies (PUBACKs in arrival order).
    """

    def __init__(self) -> None:
        self._order: deque[T] = deque()
        self._done: set[T] = set()
        self._known: set[T] = set()

    def __len__(self) -> int:
        return len(self._order)

    def add(self, token: T) -> None:
        if token in self._known:
            raise ValueError(f"token {token!r} is already pending")
        self._order.append(token)
        self._known.add(token)

    def complete(self, token: T) -> list[T]:
        """Mark ``token`` done; return the tokens now releasable, in order."""
        if token not in self._known:
            return []
        self._done.add(token)
        released: list[T] = []
        while self._order and self._order[0] in self._done:
            head = self._order.popleft()
            self._done.discard(head)
            self._known.discard(head)
            released.append(head)
        return released

    def clear(self) -> None:
        self._order.clear()
        self._done.clear()
        self._known.clear()
