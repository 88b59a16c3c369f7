"""Kafka for northbound links (adapter): a receiver link's consumer group member, and the
follower of the command path's replies. Each runs on a thread of its own; what crosses to the
event loop are plain values (amqp.north_model.Record, dicts), never a proton object.

:class:`StreamFeed`: one consumer per link, group ``amqp.north_model.group_id``, no auto-commit.
It hands over at most as many records as the link asked for (:meth:`StreamFeed.grant`); with
nothing asked its partitions are paused (nothing fetched, nothing buffered). An offset is
committed only once every record before it on its partition was settled
(:meth:`StreamFeed.settled`, amqp.north_model.PartitionOffsets). A group's first member starts
at the partitions' ends (and commits them at once, so a member joining later misses nothing
sent after the first attach); later members start at the committed offsets.

A member that librdkafka wedges fetches nothing while records wait (issue 32): every
``every_s`` its :class:`~kafka_watch.stall.StallJudge` (``stall_s``) is shown its positions and
its partitions' ends, and one behind without moving while it was not paused for want of credit
is logged, counted (``on_renewed``) and replaced by a new member of the same group: what was
settled is committed, its partitions are let go as in a rebalance (records sent but not settled
are sent again by the new member, from the commit), and the old member is closed in a thread of
its own (:func:`kafka_watch.retired.retire_member`: it leaves the group).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, KafkaException, TopicPartition

from amqp.north_model import PartitionOffsets, Record
from appconfig.kafka_security import client_base
from commands.client import Tail
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire, retire_member
from kafka_watch.stall import StallJudge

log = logging.getLogger(__name__)
_POLL_S = 0.1
_KAFKA_S = 10.0
_BATCH = 500
# a link out of credit keeps its partitions fetching (librdkafka's bounded prefetch) this long
# before they are paused: pausing drops what was prefetched, and a reader that accepts as it
# goes runs out of credit between every two grants (measured: 332 msgs/s pausing at once)
_PAUSE_AFTER_S = 1.0


class StreamFeed:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        on_records: Callable[[list[Record]], None],
        on_ready: Callable[[], None],
        stall_s: float = 30.0,
        on_renewed: Callable[[], None] = lambda: None,
    ) -> None:
        self.topic = topic
        self.group = group
        self.stall = StallJudge(f"amqp-north {group}", stall_s)
        self._on_renewed = on_renewed  # a stalled member replaced (any thread)
        # tests: each member, once assigned, in the reader's thread (a member's methods called
        # from another thread wait while this one consumes: measured 18-248 s, loaded)
        self.on_assigned: Callable[[Consumer], None] | None = None
        self._consumer: Consumer | None = None  # the current member (callbacks of others: no)
        self._settings: dict[str, Any] = {
            **client_base(bootstrap),
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "enable.partition.eof": False,
            "queued.max.messages.kbytes": 1024,  # librdkafka's prefetch per partition, bounded
            "fetch.wait.max.ms": 20,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
        self._loop = asyncio.get_running_loop()
        self._on_records = on_records
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._allowance = 0
        self._settled: queue.SimpleQueue[tuple[int, int, int]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._granted = threading.Event()
        self._offsets: dict[int, PartitionOffsets] = {}
        self._epochs: dict[int, int] = {}
        self._ready = False
        self.paused = False
        self._thread = threading.Thread(target=self._run, name=f"amqp-north-{group}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # --- the event loop's side --------------------------------------------------------------

    def grant(self, count: int) -> None:
        """The link may take ``count`` more records."""
        with self._lock:
            self._allowance += count
        self._granted.set()

    def settled(self, rec: Record) -> None:
        """The application settled ``rec`` (accepted or rejected; pre-settled: sent)."""
        self._settled.put((rec.partition, rec.epoch, rec.offset))

    def close(self) -> None:
        """Commit what was settled, leave the group (its partitions go to the other members)."""
        self._stop.set()

    # --- the thread -------------------------------------------------------------------------

    def _subscribe(self) -> Consumer:
        consumer = self._consumer = Consumer(self._settings)
        consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.stall.assigned(time.monotonic())
        self.paused = False
        return consumer

    def _run(self) -> None:
        consumer = self._subscribe()
        try:
            idle_since: float | None = None
            while not self._stop.is_set():
                self._commit(consumer, self._take_settled(), asynchronous=True)
                self._granted.clear()
                with self._lock:
                    allowance = self._allowance
                if allowance > 0:
                    idle_since = None
                elif not self.paused:  # wait for a grant, still fetching, then pause
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since < _PAUSE_AFTER_S:
                        self._granted.wait(_POLL_S)
                        continue
                self._pause(consumer, allowance <= 0)
                msgs = consumer.consume(max(1, min(allowance, _BATCH)), _POLL_S)
                batch = self._records(msgs)
                if batch:
                    with self._lock:
                        self._allowance -= len(batch)
                    self._loop.call_soon_threadsafe(self._on_records, batch)
                consumer = self._watch(consumer)
            self._commit(consumer, self._take_settled(), asynchronous=False)
        except Exception:  # the link lives on without records; say why
            log.exception("northbound reader %s failed", self.group)
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                consumer.close()

    def _watch(self, consumer: Consumer) -> Consumer:
        """``consumer``, or a new member if it stalled (see the module's doc)."""
        if self.paused:  # out of credit: not moving is what it was told to do
            self.stall.reset()
            return consumer
        if not self.stall.due(time.monotonic()):
            return consumer
        try:
            stalled = consumer_stalled(consumer, self.stall, {}, f"northbound reader {self.group}:"
                                       " its", group_start="latest")  # fmt: skip
        except KafkaException as exc:  # Kafka not answering: nothing to judge
            log.debug("northbound reader %s: stall check failed: %s", self.group, exc)
            return consumer
        if not stalled:
            return consumer
        self._commit(consumer, self._take_settled() | set(self._offsets), asynchronous=True)
        self._offsets.clear()  # unsettled records: the new member sends them again
        new = self._subscribe()
        retire_member(consumer)  # its callbacks no longer act: not the current member
        self._on_renewed()
        return new

    def _pause(self, consumer: Consumer, pause: bool) -> None:
        if pause == self.paused:
            return
        parts = consumer.assignment()
        if pause:
            consumer.pause(parts)
        else:
            consumer.resume(parts)
        self.paused = pause

    def _records(self, msgs: list[Any]) -> list[Record]:
        batch = []
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("northbound reader %s: %s", self.group, err)
                continue
            partition, offset = msg.partition(), msg.offset()
            offsets = self._offsets.get(partition)
            if offsets is None:
                continue  # revoked meanwhile: the new owner sends it
            offsets.sent(offset)
            headers = tuple((k, v) for k, v in (msg.headers() or []) if v is not None)
            batch.append(Record(partition, offset, self._epochs[partition], msg.key(),
                                msg.value() or b"", msg.timestamp()[1], headers))  # fmt: skip
        return batch

    def _take_settled(self) -> set[int]:
        """Apply the settlements queued so far; the partitions whose commit point moved."""
        moved: set[int] = set()
        while True:
            try:
                partition, epoch, offset = self._settled.get_nowait()
            except queue.Empty:
                return moved
            offsets = self._offsets.get(partition)
            fresh = offsets is not None and self._epochs.get(partition) == epoch
            if fresh and offsets is not None and offsets.done(offset):
                moved.add(partition)

    def _commit(self, consumer: Consumer, partitions: set[int], *, asynchronous: bool) -> None:
        if not partitions:
            return
        wanted = [
            TopicPartition(self.topic, p, self._offsets[p].committable)
            for p in sorted(partitions)
            if p in self._offsets and self._offsets[p].committable >= 0
        ]
        if not wanted:
            return
        try:
            if asynchronous:
                consumer.commit(offsets=wanted, asynchronous=True)
            else:
                consumer.commit(offsets=wanted, asynchronous=False)
        except KafkaException as exc:
            log.warning("northbound reader %s: commit failed: %s", self.group, exc)

    def _assigned(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        """Start at the committed offsets; a partition without one at its end, committed now."""
        if consumer is not self._consumer:
            return  # a replaced member's
        try:
            committed = consumer.committed(parts, timeout=_KAFKA_S)
            fresh = []
            for tp in committed:
                if tp.offset < 0:
                    _low, high = consumer.get_watermark_offsets(tp, timeout=_KAFKA_S)
                    tp.offset = high
                    fresh.append(TopicPartition(tp.topic, tp.partition, high))
            if fresh:
                consumer.commit(offsets=fresh, asynchronous=False)
        except KafkaException as exc:  # Kafka slow: the stored offsets, else the end (latest)
            log.warning("northbound reader %s: start offsets not read: %s", self.group, exc)
            committed = [TopicPartition(tp.topic, tp.partition, OFFSET_STORED) for tp in parts]
        for tp in committed:
            self._epochs[tp.partition] = self._epochs.get(tp.partition, 0) + 1
            self._offsets[tp.partition] = PartitionOffsets(tp.offset)
        consumer.assign(committed)
        self.paused = False
        if self.on_assigned is not None:
            self.on_assigned(consumer)
        if not self._ready:
            self._ready = True
            self._loop.call_soon_threadsafe(self._on_ready)

    def _revoked(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        """Commit what was settled of the partitions leaving; forget them (records of theirs
        still unsettled are the next owner's to send again)."""
        if consumer is not self._consumer:
            return  # a replaced member's: let go of when it was replaced
        self._commit(consumer, self._take_settled() | {tp.partition for tp in parts},
                     asynchronous=False)  # fmt: skip
        for tp in parts:
            self._offsets.pop(tp.partition, None)


class ReplyFollower:
    """The command path's replies (``iot.command-replies``) from their end, as they come.

    Its consumer (assigned, no group) is judged as a northbound member is (``stall_s``, issue
    32): one behind without moving is logged, counted (``on_renewed``) and replaced by a new
    one assigned at the old one's positions (nothing handed over twice or skipped)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        on_reply: Callable[[dict[str, Any]], None],
        *,
        stall_s: float = 30.0,
        on_renewed: Callable[[], None] = lambda: None,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._on_reply = on_reply
        self.stall = StallJudge(f"amqp-replies {topic}", stall_s)
        self._on_renewed = on_renewed
        self._handed: dict[tuple[str, int], int] = {}  # per partition: the next offset to hand
        self.on_tail: Callable[[Tail], None] | None = None  # tests: each new Tail, its thread
        self._stop = threading.Event()
        self._tail: Tail | None = None
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        """Blocking (run it in a thread): replies written from now on are followed."""
        self._tail = self._new_tail()
        threading.Thread(target=self._run, name="amqp-replies", daemon=True).start()

    def _new_tail(self) -> Tail:
        tail = Tail(self._bootstrap, [self._topic], extra=client_base(self._bootstrap),
                    starts=self._handed)  # fmt: skip
        for key, end in tail.ends.items():  # a partition not read yet: where it starts
            self._handed.setdefault(key, end)
        self.stall.assigned(time.monotonic())
        if self.on_tail is not None:
            self.on_tail(tail)
        return tail

    def _run(self) -> None:
        assert self._tail is not None
        while not self._stop.is_set():
            try:
                msgs = self._tail.poll(_POLL_S)
                self._watch()
            except Exception as exc:  # noqa: BLE001 - keep following
                log.warning("reading the command replies: %s", exc)
                continue
            for msg in msgs:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if topic is not None and partition is not None and offset is not None:
                    self._handed[(topic, partition)] = offset + 1
                try:
                    doc = orjson.loads(msg.value() or b"")
                except orjson.JSONDecodeError:
                    continue
                if isinstance(doc, dict):
                    self._loop.call_soon_threadsafe(self._on_reply, doc)
        self._tail.close()

    def _watch(self) -> None:
        """Replace the Tail if its consumer stalled (see the class's doc)."""
        assert self._tail is not None
        if not self.stall.due(time.monotonic()):
            return
        consumer = self._tail.consumer
        try:
            if not consumer_stalled(consumer, self.stall, self._handed,
                                    f"command replies follower ({self._topic}): its"):  # fmt: skip
                return
        except KafkaException as exc:  # Kafka not answering: nothing to judge
            log.debug("command replies follower: stall check failed: %s", exc)
            return
        for p in consumer.position(consumer.assignment()):  # past a transaction's marker
            key = (p.topic, p.partition)
            self._handed[key] = max(p.offset, self._handed.get(key, -1))
        old, self._tail = self._tail, self._new_tail()
        retire(old)  # freed in the reaper's thread (no group to leave)
        self._on_renewed()

    def close(self) -> None:
        self._stop.set()
