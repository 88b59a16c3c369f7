"""Queues on Kafka: the receivers' consumer group per queue, and the marker partitions' owner.

- ``QueueConsumer``: Kafka group ``iot-api.queue--<queue>`` (the instances share a queue's
  partitions), from the beginning of the log. Its offsets are committed only once the start
  markers of what it handed out are in Kafka: from then on the markers own those messages.
- ``MarkerTracker``: a thread in Kafka group ``iot-api.queue-tracker--<markers topic>``; each
  marker partition has one owner, which rebuilds the partition's table from the oldest message
  still in flight (its committed offset), ticks its clock into the partition when something is
  due, and on reading its own tick back redelivers (a copy with its delivery count, appended to
  the same partition of the queue) or dead-letters what is due, then writes ``done``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from api.plumbing.buffered_member import BufferedMember
from api.plumbing.kafka_batch import take
from api.queues import model as qm
from appconfig.kafka_security import client_base, delivery_timeouts
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire_member
from kafka_watch.stall import StallJudge, StallTally

log = logging.getLogger(__name__)
_SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}  # a dead instance's
# partitions move within seconds (6 s is the broker's smallest session by default)


def _new_token() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    count: int  # deliveries it already had
    # its delivery's token, made when it is read and kept while it waits in the buffer: a
    # receive whose start markers timed out (written or not) and the next receive of the same
    # record write one delivery, which the owner redelivers only if that is not answered; a
    # record read again (its partition revoked, then assigned) is a new delivery
    token: str = field(default_factory=_new_token, compare=False)


def ensure_markers_topic(
    bootstrap: str, topic: str, partitions: int, max_bytes: int, timeout_s: float = 3.0
) -> None:
    """The markers topic: plain retention (the owner re-reads from its oldest start), records
    large enough for a start carrying a whole message."""
    admin = AdminClient({**client_base(bootstrap), "client.id": "iot-api-queues"})
    brokers = len(admin.list_topics(timeout=timeout_s).brokers) or 1
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=min(3, brokers),
        config={"max.message.bytes": str(max_bytes + 64 * 1024)},
    )
    future = admin.create_topics([new], operation_timeout=10)[topic]
    try:
        future.result(15)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class QueueConsumer(BufferedMember[Received]):
    """One queue's member of its receivers' group; a request holds :attr:`lock` from fetch to
    commit (what was fetched beyond a receive's count waits in the buffer, uncommitted)."""

    def __init__(
        self,
        bootstrap: str,
        queue: str,
        *,
        buffer_max: int = 1000,
        draining: threading.Event | None = None,
        stall: StallJudge | None = None,
        tally: StallTally | None = None,
    ) -> None:
        super().__init__(buffer_max, draining, stall=stall, tally=tally)
        self.queue = queue
        self._settings = {
            **client_base(bootstrap),
            "group.id": f"iot-api.queue--{queue}",
            "client.id": "iot-api-queue",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # a queue holds what was sent before any receive
            "max.poll.interval.ms": 60000,
            **_SESSION,
        }
        self._consumer = self._new_member()

    def _new_member(self) -> Consumer:
        consumer = Consumer(self._settings)
        consumer.subscribe([self.queue], on_revoke=self._on_revoke, on_assign=self._on_assign)
        return consumer

    def _who(self) -> str:
        return f"queue {self.queue}'s consumer"

    def _reset(self) -> str:
        return "earliest"

    def _record(self, msg: Any) -> Received | None:
        if msg.error() is not None:
            return None
        return Received(
            msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value() or b"",
            qm.delivery_count(msg.headers()),
        )  # fmt: skip

    def _commit_blocking(self, handed: list[Received]) -> None:
        failed = self._commit_handed(self.queue, handed)
        if failed is not None:  # moved meanwhile: handed out again (at-least-once)
            log.warning("queue %s: commit failed: %s", self.queue, failed)

    async def commit(self, handed: list[Received]) -> None:
        """Their start markers are in Kafka: drop them and commit past them."""
        await asyncio.to_thread(self._commit_blocking, handed)


class _Owned:
    """A marker partition this instance owns, in this assignment generation."""

    def __init__(self) -> None:
        self.generation = uuid.uuid4().hex
        self.table = qm.MarkerTable(next_offset=-1)
        self.tick_sent = 0.0


class MarkerTracker:
    """The owner of marker partitions: redelivery and dead-lettering (a thread)."""

    def __init__(
        self,
        bootstrap: str,
        markers: str,
        *,
        partitions: int,
        grace_ms: int,
        max_bytes: int,
        stall_s: float = 30.0,
    ) -> None:
        self._bootstrap = bootstrap
        # a member that stalls (behind without moving, issue 32) is replaced by a new member
        # of the group, the old one closed off this thread; counted on /metrics
        self.stall = StallJudge("queue-tracker", stall_s)
        self.on_assigned: Any = None  # tests: the member, once assigned (in its thread)
        self._partitions = partitions
        self._max_bytes = max_bytes
        self.markers = markers
        self._grace_ms = grace_ms
        self._stop = threading.Event()
        self._owned: dict[int, _Owned] = {}
        self._settings = {
                **client_base(bootstrap),
                "group.id": f"iot-api.queue-tracker--{markers}",
                "client.id": "iot-api-tracker",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "max.poll.interval.ms": 60000,
                "fetch.max.bytes": 64 * 1024 * 1024,
                **_SESSION,
            }  # fmt: skip
        self._consumer = Consumer(self._settings)
        self._producer = Producer(
            {
                **client_base(bootstrap),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                **delivery_timeouts(30000),
                "message.max.bytes": max_bytes + 64 * 1024,
                "client.id": "iot-api-tracker",
            }
        )
        self._thread = threading.Thread(target=self._run, name="queue-tracker", daemon=True)
        self.redelivered = 0
        self.dead_lettered = 0

    def start(self) -> None:
        self._thread.start()

    def _subscribe(self) -> bool:
        """Make the markers topic if needed (Kafka may be down at start: keep trying)."""
        while not self._stop.is_set():
            try:
                ensure_markers_topic(
                    self._bootstrap, self.markers, self._partitions, self._max_bytes
                )
            except KafkaException as exc:
                # the error, not the exception: its traceback would keep the admin client
                # (and its reconnects) alive in whatever keeps log records
                log.warning("queue markers topic %s: %s", self.markers, exc.args[0])
                self._stop.wait(2.0)
                continue
            self._consumer.subscribe(
                [self.markers], on_assign=self._on_assign, on_revoke=self._on_revoke
            )
            return True
        return False

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    # --- ownership -------------------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced member's (closing in a thread of its own)
        for tp in partitions:  # read from the committed low water: the table rebuilds itself
            self._owned[tp.partition] = _Owned()
        log.info("queue markers: own %s", sorted(self._owned))
        if self.on_assigned is not None:
            consumer.assign(partitions)  # as the client would after this call, from the commit
            self.on_assigned(consumer)

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced member's: what it owned was committed when it was replaced
        self._commit([tp.partition for tp in partitions], consumer)
        for tp in partitions:
            self._owned.pop(tp.partition, None)

    def _commit(self, partitions: list[int], consumer: Consumer) -> None:
        offsets = []
        for p in partitions:
            owned = self._owned.get(p)
            if owned is not None and owned.table.next_offset >= 0:
                offsets.append(TopicPartition(self.markers, p, owned.table.low_water()))
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:  # read again from an older point: nothing lost
                log.warning("queue markers: commit failed: %s", exc)

    # --- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        last_commit = time.monotonic()
        try:
            if not self._subscribe():
                return
            while not self._stop.is_set():
                for msg in take(self._consumer, 500, 0.1):
                    if msg.error() is None:
                        self._read(msg.partition() or 0, msg.offset() or 0, msg.value() or b"")
                self._tick()
                self._watch()
                if time.monotonic() - last_commit > 1.0:
                    self._commit(list(self._owned), self._consumer)
                    last_commit = time.monotonic()
        except Exception:
            log.exception("queue markers: the tracker stopped")
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                self._commit(list(self._owned), self._consumer)
                self._consumer.close()  # leaves the group: another instance takes over now
            self._producer.flush(10)
            self._producer = None  # type: ignore[assignment]  # freed: no reconnects after stop

    def _watch(self) -> None:
        """Now and then, whether the member stalled; if so, commit what it owned and replace
        it by a new member, which rebuilds the tables from the commit (as after a rebalance)."""
        if not self.stall.due(time.monotonic()):
            return
        old = self._consumer
        try:
            if not consumer_stalled(old, self.stall, {}, "queue markers: the tracker's",
                                    group_start="earliest"):  # fmt: skip
                return
        except KafkaException as exc:  # Kafka not answering: nothing to judge
            log.debug("queue markers: stall check failed: %s", exc)
            return
        self._commit(list(self._owned), old)
        self._owned.clear()
        self._consumer = Consumer(self._settings)
        self._consumer.subscribe([self.markers], on_assign=self._on_assign,
                                 on_revoke=self._on_revoke)  # fmt: skip
        self.stall.assigned(time.monotonic())
        retire_member(old)

    def _read(self, partition: int, offset: int, raw: bytes) -> None:
        owned = self._owned.get(partition)
        marker = qm.decode_marker(raw)
        if owned is None or marker is None:
            return
        if owned.table.next_offset < 0:
            owned.table.next_offset = offset
        if marker.kind != qm.TICK:
            owned.table.apply(offset, marker)
            return
        owned.table.next_offset = max(owned.table.next_offset, offset + 1)
        if marker.owner == owned.generation:  # ours: every marker before it has been read
            owned.tick_sent = 0.0
            self._redeliver(partition, owned, marker.now_ms)

    def _tick(self) -> None:
        now = time.time()
        for partition, owned in self._owned.items():
            if owned.tick_sent and now - owned.tick_sent < 5.0:
                continue  # one tick in flight at a time
            if not owned.table.anything_due(int(now * 1000), self._grace_ms):
                continue
            self._producer.produce(
                self.markers,
                qm.tick_marker(owned.generation, int(now * 1000)),
                partition=partition,
            )
            owned.tick_sent = now
        self._producer.poll(0)

    def _redeliver(self, partition: int, owned: _Owned, tick_ms: int) -> None:
        due = owned.table.due(tick_ms, self._grace_ms)
        if not due:
            return
        failed: list[str] = []

        def report(token: str) -> Any:
            def on_delivery(err: KafkaError | None, _msg: Any) -> None:
                if err is not None:
                    failed.append(token)

            return on_delivery

        for r in due:
            headers: list[tuple[str, str | bytes | None]] = [(qm.COUNT_HEADER, str(r.count))]
            if r.dead:
                headers += [
                    ("iot-queue", r.queue),
                    ("iot-queue-partition", str(r.partition)),
                    ("iot-queue-offset", str(r.offset)),
                ]
                self._producer.produce(
                    r.topic, r.value, r.key, headers=headers, on_delivery=report(r.token)
                )
            else:  # same partition: the copy stays with its key's neighbours
                self._producer.produce(
                    r.topic, r.value, r.key, partition=r.partition, headers=headers,
                    on_delivery=report(r.token),
                )  # fmt: skip
        self._producer.flush(30)
        for r in due:
            if r.token in failed:
                log.warning("queue %s: redelivery of %d/%d failed", r.queue, r.partition, r.offset)
                continue
            why = "dead-lettered" if r.dead else "redelivered"
            self._producer.produce(
                self.markers,
                qm.done_marker(r.token, why),
                qm.marker_key(r.queue, r.partition),
                partition=partition,
            )
            owned.table.settle(r.token)
            if r.dead:
                self.dead_lettered += 1
            else:
                self.redelivered += 1
        self._producer.flush(30)
