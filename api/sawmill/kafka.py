"""Reading a topic's partitions for sawmill's facade: ranges, the last N, since a time, follow.

No consumer group: partitions are assigned at explicit offsets and nothing is committed (sawmill
seeks every request anyway), so these reads never disturb MR's groups or the queues. Every call
here blocks; the handlers run them in threads.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from api.plumbing.kafka_admin import KafkaUnavailableError, NoSuchTopicError
from api.plumbing.kafka_batch import take
from api.sawmill.model import Message, Start
from appconfig.kafka_security import client_base
from kafka_watch.consumer import consumer_stall, stalled_log
from kafka_watch.retired import retire
from kafka_watch.stall import Partition, StallJudge, StallTally

_NO_LEADER_YET = frozenset(
    {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT}
)
_READ_S = 15.0  # a range read gives up after this long (a partition that cannot be fetched)
_CHECK_S = 2.0  # a stall check's Kafka requests wait at most this long (a stream's poll waits)


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            **client_base(bootstrap),
            "group.id": f"iot-api-reader-{uuid.uuid4().hex[:8]}",  # never joined: assign only
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "iot-api-sawmill",
        }
    )


def _message(msg: object) -> Message:
    _kind, ts = msg.timestamp()  # type: ignore[attr-defined]
    return Message(msg.partition() or 0, msg.offset() or 0, ts, msg.value() or b"", msg.key())  # type: ignore[attr-defined]


class PartitionRanges:
    """One topic's partitions with their watermarks, read once per request."""

    def __init__(self, consumer: Consumer, topic: str) -> None:
        try:
            meta = consumer.list_topics(topic, timeout=10)
        except KafkaException as exc:
            raise KafkaUnavailableError(str(exc)) from exc
        found = meta.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise NoSuchTopicError(topic)
        self.topic = topic
        self.marks: dict[int, tuple[int, int]] = {}
        for p in sorted(found.partitions):
            self.marks[p] = _watermarks(consumer, TopicPartition(topic, p))


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """(low, high); a topic just created may not have every partition's leader yet: retried."""
    deadline = time.monotonic() + 10
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            return int(low), int(high)
        except KafkaException as exc:
            again = exc.args[0].retriable() or exc.args[0].code() in _NO_LEADER_YET
            if not again or time.monotonic() > deadline:
                raise KafkaUnavailableError(str(exc)) from exc
            time.sleep(0.2)


def _read(
    consumer: Consumer, topic: str, starts: dict[int, int], ends: dict[int, int]
) -> list[Message]:
    """Every record of [start, end) of each partition (fewer if the read times out)."""
    todo = {p: s for p, s in starts.items() if s < ends[p]}
    if not todo:
        return []
    consumer.assign([TopicPartition(topic, p, s) for p, s in todo.items()])
    found: list[Message] = []
    deadline = time.monotonic() + _READ_S
    while todo and time.monotonic() < deadline:
        batch = take(consumer, 1000, 0.5)
        for msg in batch:
            if msg.error() is not None:
                continue
            m = _message(msg)
            if m.partition in todo and m.offset < ends[m.partition]:
                found.append(m)
            if m.offset + 1 >= ends[m.partition]:
                todo.pop(m.partition, None)
        if not batch and todo:  # a gap at the tail (compaction, transaction markers)
            for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                if tp.offset >= ends[tp.partition]:
                    todo.pop(tp.partition, None)
    return found


def read_from(
    bootstrap: str, topic: str, start: Start, limit: int
) -> tuple[list[Message], dict[int, int]]:
    """Up to ``limit`` records of each partition from ``start`` (to the current end), and the
    start offset of each partition."""
    consumer = _consumer(bootstrap)
    try:
        ranges = PartitionRanges(consumer, topic)
        starts = {p: start.offset_for(p, lo, hi) for p, (lo, hi) in ranges.marks.items()}
        ends = {p: min(hi, starts[p] + limit) for p, (_lo, hi) in ranges.marks.items()}
        return _read(consumer, topic, starts, ends), starts
    finally:
        consumer.close()


def read_latest(bootstrap: str, topic: str, count: int) -> list[Message]:
    """The last ``count`` records of each partition (the caller keeps the newest ``count``)."""
    consumer = _consumer(bootstrap)
    try:
        ranges = PartitionRanges(consumer, topic)
        starts = {p: max(lo, hi - count) for p, (lo, hi) in ranges.marks.items()}
        ends = {p: hi for p, (_lo, hi) in ranges.marks.items()}
        return _read(consumer, topic, starts, ends)
    finally:
        consumer.close()


def read_since(
    bootstrap: str, topic: str, since_ms: int, limit: int
) -> tuple[list[Message], dict[int, int]]:
    """Up to ``limit`` records of each partition stamped at or after ``since_ms``."""
    consumer = _consumer(bootstrap)
    try:
        ranges = PartitionRanges(consumer, topic)
        asked = [TopicPartition(topic, p, since_ms) for p in ranges.marks]
        try:
            found = consumer.offsets_for_times(asked, timeout=10)
        except KafkaException as exc:
            raise KafkaUnavailableError(str(exc)) from exc
        starts = {}
        for tp in found:  # -1: nothing that recent in this partition
            lo, hi = ranges.marks[tp.partition]
            starts[tp.partition] = hi if tp.offset < 0 else max(lo, tp.offset)
        ends = {p: min(hi, starts[p] + limit) for p, (_lo, hi) in ranges.marks.items()}
        return _read(consumer, topic, starts, ends), starts
    finally:
        consumer.close()


class StreamWatch:
    """The stall check of every live SSE stream's reader (sawmill's, the operator API's device
    telemetry): judged with ``stall_s``, counted as one client, ``sse-streams``, on /metrics."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self._live: weakref.WeakSet[Follower] = weakref.WeakSet()
        self.tally = StallTally(
            "sse-streams", lambda: [f.stall for f in list(self._live) if f.stall]
        )

    def judge(self, follower: Follower) -> StallJudge:
        self._live.add(follower)
        return StallJudge("sse-streams", self.stall_s)


class Follower:
    """A Server-Sent Events stream's reader: every partition from its start, then new records.

    With a ``watch``, a reader that librdkafka wedges (it fetches nothing while its partitions'
    high watermarks move on, issue 32) is replaced after ``stall_s`` by a new one assigned where
    the old one stood, so the stream goes on with nothing skipped or sent twice; checked in
    :meth:`poll`'s thread every ``StallJudge.every_s``, each check's requests bounded."""

    def __init__(
        self, bootstrap: str, topic: str, start: Start, watch: StreamWatch | None = None
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._consumer = _consumer(bootstrap)
        self._lock = threading.Lock()
        self._closed = False
        try:
            ranges = PartitionRanges(self._consumer, topic)
        except Exception:
            self._consumer.close()
            raise
        self.positions = {p: start.offset_for(p, lo, hi) for p, (lo, hi) in ranges.marks.items()}
        self._handed: dict[Partition, int] = {(topic, p): o for p, o in self.positions.items()}
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in self.positions.items()])
        self._watch = watch
        self.stall = watch.judge(self) if watch is not None else None
        if self.stall is not None:
            self.stall.assigned(time.monotonic())

    def poll(self, count: int, timeout_s: float) -> list[Message]:
        with self._lock:
            if self._closed:
                return []
            batch = [m for m in take(self._consumer, count, timeout_s) if m.error() is None]
            for m in batch:
                self._handed[(self._topic, m.partition() or 0)] = (m.offset() or 0) + 1
            self._check()
        return [_message(m) for m in batch]

    def _check(self) -> None:
        """Replace the reader if it stalled (under the lock, in the polling thread)."""
        judge, now = self.stall, time.monotonic()
        if judge is None or self._watch is None or not judge.due(now):
            return
        try:
            stuck = consumer_stall(self._consumer, judge, self._handed, _CHECK_S, now)
        except KafkaException:  # Kafka not answering: nothing to judge now
            return
        if not stuck:
            return
        stalled_log(judge, stuck, f"SSE stream of {self._topic}: its")
        self._watch.tally.renewals += 1
        old, self._consumer = self._consumer, _consumer(self._bootstrap)
        self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in self._handed.items()])
        judge.assigned(time.monotonic())
        retire(old)  # freed off this thread: never joined a group, nothing to leave

    def close(self) -> None:
        with self._lock:  # after a poll still running in its thread
            if not self._closed:
                self._closed = True
                self._consumer.close()
