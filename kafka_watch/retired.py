"""Kafka clients let go of in a thread of their own, never on an event loop.

Freeing a librdkafka client (the last reference to a Producer, Consumer or AdminClient
dropped) waits until every one of its broker threads has ended, and a broker thread resolving
a host name cannot end before the lookup does: a client whose bootstrap names a host cut off
the network took 7 s to free in a compose container (Docker's DNS answers such a name only
after its 10-s timeout). Dropped on the event loop, that is 7 s in which no request is
answered; several at once kept iot-api's ``/readyz`` from answering for 30 s (issue 33's host
loss test). So a client that is replaced or closed is handed to :func:`retire`, which keeps
it for a moment (so that the references the caller still holds, its frames and errors, go
first) and then drops it in the reaper thread; :func:`drain` waits until all are gone (a
service's stop: no client outlives it). Shared by every service that replaces a long-lived
client (:mod:`kafka_watch`)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

GRACE_S = 1.0  # long enough for the retiring call's own frames to unwind

_retired: queue.SimpleQueue[tuple[float, Any]] = queue.SimpleQueue()
_state = threading.Condition()  # guards the two below
_pending = [0]  # retired, not yet freed
_reaper: list[threading.Thread] = []  # the one reaper thread, once started


def retire(client: Any) -> None:
    """Let go of ``client`` (None: nothing to do) in the reaper thread, after ``GRACE_S``."""
    if client is None:
        return
    with _state:
        _pending[0] += 1
        if not _reaper:
            _reaper.append(threading.Thread(target=_reap, name="kafka-client-reaper", daemon=True))
            _reaper[0].start()
    _retired.put((time.monotonic() + GRACE_S, client))


def retire_member(consumer: Any, closed: Callable[[], None] | None = None) -> None:
    """Let go of a group member: closed in a thread of its own (it leaves its group, and
    commits what was stored if it auto-commits), then freed as :func:`retire` frees. Freed
    without ``close()``, a member does not leave: librdkafka's destroy skips the consumer
    close, and the group waits for the session timeout (measured: a new member of the group
    got its partitions after 45 s; 0.4 s with the close). Its rebalance callbacks run in that
    thread during the close: its owner ignores them (``closed`` is called once it is done)."""
    with _state:
        _pending[0] += 1

    def close() -> None:
        try:
            consumer.close()
        except Exception as exc:  # noqa: BLE001 - a wedged member's close may fail: freed anyway
            log.debug("closing a replaced Kafka consumer failed: %s", exc)
        finally:
            if closed is not None:
                closed()
            retire(consumer)
            with _state:
                _pending[0] -= 1
                _state.notify_all()

    threading.Thread(target=close, name="kafka-member-close", daemon=True).start()


def drain(timeout_s: float) -> bool:
    """Wait until every client retired so far is freed; False if some still is at timeout."""
    with _state:
        return _state.wait_for(lambda: _pending[0] == 0, timeout_s)


def _reap() -> None:
    while True:
        due, client = _retired.get()
        time.sleep(max(0.0, due - time.monotonic()))
        del client  # librdkafka's destroy runs here, however long its threads take to end
        with _state:
            _pending[0] -= 1
            _state.notify_all()
