"""One batch from a Kafka consumer for a waiting client: the first record as soon as it arrives.

confluent-kafka's ``Consumer.consume(num_messages=n, timeout=t)`` returns only when ``n``
records are there or ``t`` expired (still so in 2.16.1, measured: 1 record published 0.3 s
into ``consume(1000, 3.0)`` came back at 3.0 s). A long poll or a stream at a low rate would
wait its whole chunk for every record. :func:`take` waits for the first record only, then
takes what the consumer has already fetched, without waiting again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

_M_co = TypeVar("_M_co", covariant=True)
_M = TypeVar("_M")


class BatchSource(Protocol[_M_co]):
    """The two calls of a confluent-kafka ``Consumer`` that :func:`take` uses."""

    def poll(self, timeout: float = ...) -> _M_co | None: ...

    def consume(self, num_messages: int = ..., timeout: float = ...) -> Sequence[_M_co]: ...


def take(consumer: BatchSource[_M], count: int, timeout_s: float) -> list[_M]:
    """Up to ``count`` records: wait at most ``timeout_s`` for the first, then only take what is
    already fetched. Error events count as records (the callers skip them, as before)."""
    if count <= 0:
        return []
    if timeout_s <= 0:
        return list(consumer.consume(num_messages=count, timeout=0))
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    if count == 1:
        return [first]
    return [first, *consumer.consume(num_messages=count - 1, timeout=0)]
