"""A Kafka group member whose records wait in a bounded buffer until a request hands them out,
committed only once handed: what MR's consumer ids (api.mr.consumers) and the queues' receivers
(api.queues.kafka) share."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition

from api.plumbing.kafka_batch import take

log = logging.getLogger(__name__)
_CHUNK_S = 0.2  # one blocking consume; a long poll is many of these (cancellable between)


class Positioned(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


_R = TypeVar("_R", bound=Positioned)


class BufferedMember(Generic[_R]):
    """What MR's consumer ids and the queues' receivers share: a group member whose records wait
    in a bounded buffer (the consumer paused while it is full) until a request hands them out,
    and are committed only once handed. A request holds :attr:`lock` from fetch to commit."""

    def __init__(self, buffer_max: int, draining: threading.Event | None = None) -> None:
        self.lock = asyncio.Lock()
        # set at shutdown: a long poll answers at once with what it has (maybe nothing)
        self._draining = draining if draining is not None else threading.Event()
        self.last_used = time.monotonic()
        self._buffer: deque[_R] = deque()
        self._buffer_max = buffer_max
        self._paused = False
        self._thread_lock = threading.Lock()
        self._consumer: Consumer | None = None
        # partition -> offset past what was handed out, where that commit failed (Kafka
        # restarting): a re-assignment starts there, not at the stale commit (a second delivery)
        self._unsaved: dict[int, int] = {}

    def _record(self, msg: Any) -> _R | None:
        """The buffered form of a consumed message (None: skip it)."""
        raise NotImplementedError

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._paused = False
        resume = {p.partition: self._unsaved.pop(p.partition) for p in partitions
                  if p.partition in self._unsaved}  # fmt: skip
        if resume:
            consumer.assign(_starts(consumer, partitions, resume))

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        gone = {p.partition for p in partitions}  # their new owner reads them from the commit
        self._buffer = deque(r for r in self._buffer if r.partition not in gone)
        self._paused = False

    def _fill_blocking(self, wanted: int, timeout_s: float) -> None:
        if self._draining.is_set():  # chunks queued for a thread before shutdown end at once
            return
        with self._thread_lock:
            consumer = self._consumer
            if consumer is None:
                return
            room = self._buffer_max - len(self._buffer)
            if room <= 0:
                if not self._paused:
                    consumer.pause(consumer.assignment())
                    self._paused = True
                consumer.poll(0)  # serve rebalances while full
                return
            if self._paused:
                consumer.resume(consumer.assignment())
                self._paused = False
            for msg in take(consumer, max(1, min(wanted, room)), timeout_s):
                record = self._record(msg)
                if record is not None:
                    self._buffer.append(record)

    async def fetch(self, limit: int, timeout_s: float) -> list[_R]:
        """Up to ``limit`` records, as soon as there is one or after ``timeout_s``; not removed
        from the buffer until committed. Call with :attr:`lock` held."""
        self.last_used = time.monotonic()
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if len(self._buffer) < limit:
                wait = 0.0 if self._buffer else max(0.0, min(_CHUNK_S, left))
                await asyncio.to_thread(self._fill_blocking, limit - len(self._buffer), wait)
            if self._buffer or deadline - time.monotonic() <= 0 or self._draining.is_set():
                self.last_used = time.monotonic()
                return await asyncio.to_thread(self._snapshot, limit)

    def _snapshot(self, limit: int) -> list[_R]:
        # under the thread lock: a cancelled request's last chunk may still be appending
        with self._thread_lock:
            return list(itertools.islice(self._buffer, limit))

    def _commit_handed(self, topic: str, handed: list[_R]) -> KafkaException | None:
        """Drop exactly what was handed out (and older), whatever moved in the buffer meanwhile,
        and commit past it; the commit's failure (a rebalance: handed out again, not lost)."""
        ends: dict[int, int] = {}
        for r in handed:
            ends[r.partition] = max(ends.get(r.partition, -1), r.offset + 1)
        with self._thread_lock:
            self._buffer = deque(r for r in self._buffer if r.offset >= ends.get(r.partition, -1))
            if self._consumer is None or not ends:
                return None
            offsets = [TopicPartition(topic, p, o) for p, o in ends.items()]
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                for p, o in ends.items():
                    self._unsaved[p] = max(o, self._unsaved.get(p, -1))
                return exc
            for p, o in ends.items():
                if self._unsaved.get(p, -1) <= o:
                    self._unsaved.pop(p, None)
            return None

    async def keep_alive(self) -> None:
        """Between requests: take part in rebalances and read ahead into the buffer."""
        if self.lock.locked():
            return
        async with self.lock:
            await asyncio.to_thread(self._fill_blocking, self._buffer_max, 0.0)

    def close_blocking(self) -> None:
        with self._thread_lock:
            if self._consumer is not None:
                with contextlib.suppress(KafkaException, RuntimeError):
                    self._consumer.close()
                self._consumer = None
            self._buffer.clear()


def _starts(
    consumer: Any, partitions: list[TopicPartition], resume: dict[int, int]
) -> list[TopicPartition]:
    """The assignment with ``resume``'s partitions starting past what this member handed out
    (or at the group's commit, if another member went further), and that commit tried again."""
    try:
        committed = {c.partition: c.offset for c in consumer.committed(partitions, timeout=5)}
    except KafkaException:
        committed = {}
    starts = []
    for p in partitions:
        if p.partition in resume:
            offset = max(resume[p.partition], committed.get(p.partition, -1))
            starts.append(TopicPartition(p.topic, p.partition, offset))
        else:
            starts.append(p)
    again = [tp for tp in starts if tp.partition in resume]
    with contextlib.suppress(KafkaException):
        consumer.commit(offsets=again, asynchronous=True)
    log.info("re-assigned past what was handed out: %s", {t.partition: t.offset for t in again})
    return starts
