"""One read at a time, shared: a caller that comes while a read is under way gets that read's
answer (or its error) instead of queueing a read of its own.

The console's consumer-group listing asks Kafka one OffsetFetch per group; the Overview's
sampler and every open Topics page ask for it. Queued one after the other behind the group
offsets' child, each read doubled the wait and the load on a Kafka just restarted (7-9 s per
call against 2-5 s for the read itself, 0.7 of a core). A caller gets an answer no older than
the read under way when it came."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedRead(Generic[T]):
    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._current: Future[T] | None = None

    def __call__(self) -> T:
        with self._lock:
            current = self._current
            mine = current is None
            if current is None:
                current = self._current = Future()
        if mine:
            try:
                current.set_result(self._read())
            except Exception as exc:  # noqa: BLE001 - handed to every caller that shared it
                current.set_exception(exc)
            finally:
                with self._lock:
                    self._current = None
                current.cancel()  # (a BaseException: the sharers do not wait for ever)
        return current.result()
