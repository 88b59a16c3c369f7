"""MR consumer groups on Kafka (contract §3): one consumer per (topic, group, id), cached.

- Kafka ``group.id`` = ``<group>--<topic>``, ``client.id`` = the MR consumer id; ids of one
  group share the partitions (competing), different groups each see everything (fan-out).
- A new group starts at the log end as of its first request: before it first subscribes, the
  partitions without a committed offset get the current end committed, so what is published
  after that first request is delivered even if the group's first rebalance is slow.
- Offsets are committed only for records returned (after the answer was written); what was
  fetched beyond ``limit`` waits in the consumer's buffer for the next request of the same id,
  and is dropped (to be fetched again from the committed offset) when its partition is revoked
  or the consumer closed: at-least-once, never the reference's loss of over-fetched records.
- A consumer id's member that stalls (fetches nothing while records wait past its position, for
  ``kafka_consumer_stall_s``) is replaced by a new member of the same group
  (api.plumbing.buffered_member): what it fetched and had not returned is read again from the
  commit, as after a rebalance; counted as ``mr-consumers`` on /metrics.
- Every blocking call on a consumer holds its thread lock; a request holds its asyncio lock from
  fetch to commit, so concurrent GETs of one id are served one after the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition

from api.plumbing.buffered_member import BufferedMember
from api.plumbing.params import kafka_group_id
from appconfig.kafka_security import client_base
from kafka_watch.stall import StallJudge, StallTally

log = logging.getLogger(__name__)
_COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,  # a topic just created: no leader yet
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Fetched:
    partition: int
    offset: int
    value: bytes


def _retrying(call: Callable[[], _T]) -> _T:
    """A new group's coordinator takes a moment to load (NOT_COORDINATOR, ...): try again."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            again = error.retriable() or error.code() in _COORDINATOR_MOVING
            if not again or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class GroupConsumer(BufferedMember[Fetched]):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        consumer_id: str,
        *,
        buffer_max: int,
        draining: threading.Event | None = None,
        stall: StallJudge | None = None,
        tally: StallTally | None = None,
    ) -> None:
        super().__init__(buffer_max, draining, stall=stall, tally=tally)
        self.topic = topic
        self.group = group
        self.consumer_id = consumer_id
        self._settings = {
            **client_base(bootstrap),
            "group.id": kafka_group_id(group, topic),
            "client.id": consumer_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 300000,
            # librdkafka prefetches up to 64 MiB per consumer by default, and every MR consumer
            # id is one: 1,000 ids on a busy topic could hold tens of GiB. 8 MiB is more than
            # the buffer (1,000 records) and an answer's limit read ahead; measured in
            # docs/benchmarks.md (HTTP door)
            "queued.max.messages.kbytes": 8192,
            "fetch.max.bytes": 8 * 1024 * 1024,
            "fetch.queue.backoff.ms": 20,  # default 1 s: a full queue stalled the next fetch
        }

    # --- life ------------------------------------------------------------------------------

    def open_blocking(self) -> None:
        consumer = Consumer(self._settings)
        try:
            self._pin_new_group_at_end(consumer)
        except KafkaException:
            consumer.close()
            raise
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._consumer = consumer

    def _pin_new_group_at_end(self, consumer: Consumer) -> None:
        meta = consumer.list_topics(self.topic, timeout=10)
        partitions = [TopicPartition(self.topic, p) for p in meta.topics[self.topic].partitions]
        committed = _retrying(lambda: consumer.committed(partitions, timeout=10))
        missing = [tp for tp in committed if tp.offset == OFFSET_INVALID]
        if not missing:
            return
        ends = []
        for tp in missing:  # a topic just created may not have its leader yet: retried
            marks = _retrying(functools.partial(consumer.get_watermark_offsets, tp, 10))
            high = marks[1]
            ends.append(TopicPartition(self.topic, tp.partition, high))
        try:
            _retrying(lambda: consumer.commit(offsets=ends, asynchronous=False) or [])
        except KafkaException as exc:  # the group is active elsewhere: its members decide
            log.warning("group %s: start not pinned (%s)", self._settings["group.id"], exc)

    def _new_member(self) -> Consumer:
        consumer = Consumer(self._settings)  # the group has its start: nothing to pin
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return consumer

    def _who(self) -> str:
        return f"MR consumer {self.group}/{self.consumer_id} on {self.topic}"

    def _reset(self) -> str:
        return str(self._settings["auto.offset.reset"])

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        super()._on_assign(consumer, partitions)
        log.debug(
            "%s/%s assigned %s", self.group, self.consumer_id, [p.partition for p in partitions]
        )

    # --- fetch and commit --------------------------------------------------------------------

    def _record(self, msg: Any) -> Fetched | None:
        if msg.error() is not None:
            log.warning("%s: %s", self.topic, msg.error())
            return None
        return Fetched(msg.partition() or 0, msg.offset() or 0, msg.value() or b"")

    def _ack_blocking(self, returned: list[Fetched]) -> None:
        failed = self._commit_handed(self.topic, returned)
        if failed is not None:  # rebalanced meanwhile: delivered again, not lost
            log.warning("%s/%s: commit failed: %s", self.group, self.consumer_id, failed)

    async def ack(self, records: list[Fetched]) -> None:
        """The answer carrying ``records`` was written: drop them and commit past them.

        Not cancellable: a client that closes its connection right after reading the answer
        makes aiohttp cancel the handler here; leaving early would release :attr:`lock` while
        the records are still in the buffer, and the id's next request would return them again
        (the repeated first batch of docs/api.md's phase 1 notes)."""
        done = asyncio.ensure_future(asyncio.to_thread(self._ack_blocking, records))
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            await asyncio.wait({done})  # hold the lock until the buffer and commit are done
            raise


class PoolFullError(Exception):
    """No consumer can be opened for a new id: the pool is at its bound and every consumer in
    it is serving a request (or librdkafka could not make one more client in this process)."""


class ConsumerPool:
    """The cached consumers, at most ``max_consumers``; a keeper task polls idle ones and closes
    the long unused. A process holds about 1,010 librdkafka clients at most (confluent-kafka
    takes one of glibc's 1,024 pthread keys per client: "Failed to initialize thread local
    storage" past that), so the pool is bounded below it: a new id closes the least recently
    used idle consumer (what it fetched and did not return is read again from its commit)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        idle_s: float,
        max_consumers: int = 900,
        buffer_max: int = 1000,
        draining: threading.Event | None = None,
        stall_s: float = 30.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._stall_s = stall_s  # a consumer id's member that stalls this long is replaced
        # its replacements, on /metrics (one name for all ids, not one per id)
        self.stall = StallTally("mr-consumers", self._judges)
        self.draining = draining if draining is not None else threading.Event()
        self._idle_s = idle_s
        self.max_consumers = max_consumers
        self._buffer_max = buffer_max
        self._consumers: dict[tuple[str, str, str], GroupConsumer] = {}
        self._creating: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._keeper: asyncio.Task[None] | None = None
        self.hits = self.misses = self.timeouts = 0  # MR's consumer cache metrics
        self.evictions = 0  # idle consumers closed to make room for a new id
        self._opening = 0

    def start(self) -> None:
        self._keeper = asyncio.get_running_loop().create_task(self._keep())

    def __len__(self) -> int:
        return len(self._consumers)

    async def get(self, topic: str, group: str, consumer_id: str) -> GroupConsumer:
        key = (topic, group, consumer_id)
        found = self._consumers.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        async with self._creating.setdefault(key, asyncio.Lock()):
            found = self._consumers.get(key)
            if found is None:
                await self._make_room()
                found = GroupConsumer(
                    self._bootstrap, topic, group, consumer_id, buffer_max=self._buffer_max,
                    draining=self.draining, tally=self.stall,
                    stall=StallJudge(f"mr-consumer {group}/{consumer_id}", self._stall_s),
                )  # fmt: skip
                self._opening += 1  # counted against the bound while it opens (in a thread)
                try:
                    await asyncio.to_thread(found.open_blocking)
                except RuntimeError as exc:  # librdkafka/confluent-kafka: no client left
                    raise PoolFullError(f"no Kafka consumer could be opened: {exc}") from exc
                finally:
                    self._opening -= 1
                self._consumers[key] = found
        self._creating.pop(key, None)
        return found

    def _judges(self) -> list[StallJudge]:
        return [c.stall for c in list(self._consumers.values()) if c.stall is not None]

    async def _make_room(self) -> None:
        """At the bound: close the least recently used consumer that no request holds."""
        while len(self._consumers) + self._opening >= self.max_consumers:
            idle = [c for c in self._consumers.values() if not c.lock.locked()]
            if not idle:
                raise PoolFullError(
                    f"{len(self._consumers) + self._opening} consumers open or opening, "
                    "every one serving a request"
                )
            self.evictions += 1
            await self.drop(min(idle, key=lambda c: c.last_used))

    async def drop(self, consumer: GroupConsumer) -> None:
        key = (consumer.topic, consumer.group, consumer.consumer_id)
        if self._consumers.get(key) is consumer:
            del self._consumers[key]
        await asyncio.to_thread(consumer.close_blocking)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            for consumer in list(self._consumers.values()):
                try:
                    if now - consumer.last_used > self._idle_s and not consumer.lock.locked():
                        self.timeouts += 1
                        await self.drop(consumer)
                    else:
                        await consumer.keep_alive()
                except Exception:  # a keeper that dies would stall every group's rebalance
                    log.exception("keeper: %s/%s", consumer.group, consumer.consumer_id)

    async def close(self) -> None:
        await close_all(self._consumers, self._keeper)


async def close_all(members: dict[Any, Any], keeper: asyncio.Task[None] | None) -> None:
    """Stop the task that keeps ``members`` alive, then close them in parallel (bounded by the
    default executor's threads: one after the other, a thousand consumers leaving their groups
    took minutes at shutdown) and forget them. The MR pool's and the queues' shutdown."""
    if keeper is not None:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
    if members:
        await asyncio.gather(*(asyncio.to_thread(m.close_blocking) for m in members.values()))
    members.clear()
