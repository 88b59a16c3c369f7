"""Reading Kafka for the simulator: topic end offsets at run start, and a run's records.

Thin adapter around confluent-kafka; clients are created inside the functions, never at import.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from device_sim.errors import VerifyError

log = logging.getLogger(__name__)

Offsets = dict[int, int]  # partition -> offset


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A Kafka record reduced to what the verifier reads."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]


def _headers(raw: Any) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in raw or []:
        data = value.encode() if isinstance(value, str) else value
        out[str(key)] = data or b""
    return out


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"iot-sim-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            # small fetches and a short prefetch queue: the verifier counts slower than Kafka
            # serves, and more only piles up (64 MB / 8 MB fetches held 2 GB of RSS reading
            # 3 million 1 kB records; these about 270 MB). A full queue must not pause a
            # partition's fetching for librdkafka's default second: that halved the speed.
            "fetch.max.bytes": 4 * 1024 * 1024,
            "max.partition.fetch.bytes": 1024 * 1024,
            "queued.min.messages": 5_000,
            "queued.max.messages.kbytes": 16 * 1024,
            "fetch.queue.backoff.ms": 10,
            "log_level": 3,
        }
    )


def _partitions(consumer: Consumer, topic: str, timeout: float) -> list[int]:
    try:
        md = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise VerifyError(f"cannot read metadata of topic {topic!r}: {exc}") from exc
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None or not tmd.partitions:
        reason = tmd.error if tmd is not None else "absent"
        raise VerifyError(f"topic {topic!r} is not available: {reason}")
    return sorted(tmd.partitions)


def _watermarks(admin: AdminClient, topic: str, partitions: list[int], timeout: float) -> Offsets:
    """End offsets of ``partitions``, in one batched ListOffsets request."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    out: Offsets = {}
    try:
        futures = admin.list_offsets(request, request_timeout=timeout)
        for tp, future in futures.items():
            out[tp.partition] = future.result().offset
    except KafkaException as exc:
        raise VerifyError(f"cannot read the end offsets of {topic}: {exc}") from exc
    return out


def end_offsets(bootstrap: str, topics: list[str], timeout: float = 10.0) -> dict[str, Offsets]:
    """The current end (high watermark) offset of every partition of ``topics``."""
    consumer = _consumer(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        return {
            t: _watermarks(admin, t, _partitions(consumer, t, timeout), timeout) for t in topics
        }
    finally:
        consumer.close()


def scan(
    bootstrap: str,
    topic: str,
    start: Offsets | None,
    *,
    keep_going: Callable[[], bool] | None = None,
    wait_s: float = 0.0,
    timeout: float = 10.0,
    batch_size: int = 10_000,
    partitions: Collection[int] | None = None,
    positions: Offsets | None = None,
) -> Iterator[list[Message]]:
    """Batches of the records of ``topic`` from ``start`` (None: the beginning) to its end.

    All partitions are read at once (reading them one after the other is about 4x slower);
    each partition's records come in offset order. Nothing is kept: the caller counts each
    batch and drops it, so memory does not grow with the topic. After reaching the end, while
    ``keep_going()`` says more is expected, new records are read for up to ``wait_s`` more
    seconds (the bridge may still be draining). ``partitions`` limits the reading to those
    (a worker's share); ``positions``, when given, is filled with the offset after the last
    record read of each partition (where another reader can go on).
    """
    consumer = _consumer(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        found = _partitions(consumer, topic, timeout)
        partitions = found if partitions is None else [p for p in found if p in set(partitions)]
        begin = {p: (start or {}).get(p, 0) for p in partitions}
        consumer.assign([TopicPartition(topic, p, begin[p]) for p in partitions])
        position = dict(begin)
        deadline: float | None = None
        while True:
            ends = _watermarks(admin, topic, partitions, timeout)
            behind = {p for p in partitions if position[p] < ends[p]}
            while behind:
                batch = consumer.consume(num_messages=batch_size, timeout=0.2)
                for msg in batch:
                    if msg.error() is not None:
                        batch = _fetched(batch, topic)
                        break
                if batch:
                    yield batch
                # the consumer's position is the offset after the last record handed over;
                # it also steps over offsets that hold no record (control records)
                for tp in consumer.position([TopicPartition(topic, p) for p in behind]):
                    if tp.offset >= 0:
                        position[tp.partition] = max(position[tp.partition], tp.offset)
                    if position[tp.partition] >= ends[tp.partition]:
                        behind.discard(tp.partition)
            if keep_going is None or not keep_going():
                break
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait_s
            if now >= deadline:
                break
            time.sleep(min(0.5, deadline - now))
        if positions is not None:
            positions.update(position)
    finally:
        consumer.close()


def partitions_of(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    """The partition numbers of ``topic``."""
    consumer = _consumer(bootstrap)
    try:
        return _partitions(consumer, topic, timeout)
    finally:
        consumer.close()


def _fetched(batch: list[Message], topic: str) -> list[Message]:
    """The records of ``batch``, skipping end-of-partition events; raises on a real error."""
    out: list[Message] = []
    for msg in batch:
        err = msg.error()
        if err is None:
            out.append(msg)
        elif err.code() != KafkaError._PARTITION_EOF:
            raise VerifyError(f"reading {topic}: {err}")
    return out


def raw_record(msg: Message) -> RawRecord:
    """A fetched Kafka message as a :class:`RawRecord`."""
    p, offset = msg.partition(), msg.offset()
    assert p is not None
    assert offset is not None
    return RawRecord(
        topic=msg.topic() or "",
        partition=p,
        offset=offset,
        timestamp=msg.timestamp()[1],
        key=msg.key(),
        value=msg.value() or b"",
        headers=_headers(msg.headers()),
    )


def read_records(
    bootstrap: str,
    topic: str,
    start: Offsets | None,
    *,
    want: Callable[[RawRecord], bool],
    keep_going: Callable[[list[RawRecord]], bool] | None = None,
    wait_s: float = 0.0,
    timeout: float = 10.0,
) -> list[RawRecord]:
    """Every record of ``topic`` from ``start`` to its end that ``want`` accepts, in a list.

    For small reads (tests); the verifier counts batches from :func:`scan` without keeping them.
    """
    kept: list[RawRecord] = []
    more = None if keep_going is None else (lambda: keep_going(kept))
    for batch in scan(bootstrap, topic, start, keep_going=more, wait_s=wait_s, timeout=timeout):
        for msg in batch:
            rec = raw_record(msg)
            if want(rec):
                kept.append(rec)
    return kept
