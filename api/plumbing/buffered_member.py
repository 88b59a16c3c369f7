"""A Kafka group member whose records wait in a bounded buffer until a request hands them out,
committed only once handed: what MR's consumer ids (api.mr.consumers) and the queues' receivers
(api.queues.kafka) share.

A member that librdkafka wedges raises nothing: it fetches nothing while records wait in its
partitions (issue 32). With a :class:`~kafka_watch.stall.StallJudge` (``stall_s``), every fill
now and then shows it the member's positions and its partitions' ends: one with records past a
position that has not moved for ``stall_s`` while the member was not paused (its buffer full)
is logged, counted (``tally``) and replaced by a new member of the same group: what it had
fetched and not handed out is dropped (read again from the group's commit, as after a
rebalance), what was handed out and committed is not read again, a commit that failed is
still resumed past (``_unsaved``); the old member is closed off the caller's thread
(:func:`kafka_watch.retired.retire_member`: it leaves the group, its callbacks then ignored)
and the group rebalances."""

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
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire_member
from kafka_watch.stall import StallJudge, StallTally

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

    def __init__(
        self,
        buffer_max: int,
        draining: threading.Event | None = None,
        *,
        stall: StallJudge | None = None,
        tally: StallTally | None = None,
    ) -> None:
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
        self.stall = stall  # None: not watched
        self._tally = tally
        self._replaced: list[Any] = []  # members being closed: their callbacks are ignored

    def _record(self, msg: Any) -> _R | None:
        """The buffered form of a consumed message (None: skip it)."""
        raise NotImplementedError

    def _new_member(self) -> Consumer:
        """A new member of the same group, subscribed (for a watched member's replacement)."""
        raise NotImplementedError

    def _who(self) -> str:
        """How the log names this member."""
        return type(self).__name__

    def _gone(self, consumer: Any) -> bool:
        return any(consumer is c for c in list(self._replaced))

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if self._gone(consumer):
            return
        self._paused = False
        resume = {p.partition: self._unsaved.pop(p.partition) for p in partitions
                  if p.partition in self._unsaved}  # fmt: skip
        if resume:
            consumer.assign(_starts(consumer, partitions, resume))

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if self._gone(consumer):
            return
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
                if self.stall is not None:  # paused: not moving is what it was told to do
                    self.stall.reset()
                return
            if self._paused:
                consumer.resume(consumer.assignment())
                self._paused = False
            for msg in take(consumer, max(1, min(wanted, room)), timeout_s):
                record = self._record(msg)
                if record is not None:
                    self._buffer.append(record)
            self._watch(consumer)

    def _watch(self, consumer: Consumer) -> None:
        """Now and then (under the thread lock), whether the member stalled; if so, replace
        it (see the module's doc)."""
        judge = self.stall
        if judge is None or not judge.due(time.monotonic()):
            return
        try:
            stalled = consumer_stalled(consumer, judge, {}, f"{self._who()}: its",
                                       group_start=self._reset())  # fmt: skip
        except KafkaException as exc:  # Kafka not answering: its requests report it
            log.debug("%s: stall check failed: %s", self._who(), exc)
            return
        if not stalled:
            return
        self._consumer = self._new_member()
        judge.assigned(time.monotonic())
        self._buffer.clear()  # read again by the new member from the group's commit
        self._paused = False
        if self._tally is not None:
            self._tally.renewals += 1
        self._replaced.append(consumer)
        retire_member(consumer, lambda: self._replaced.remove(consumer))

    def _reset(self) -> str:
        """The member's ``auto.offset.reset`` (where a partition without a commit starts)."""
        return "latest"

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
