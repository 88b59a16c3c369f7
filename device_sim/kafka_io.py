"""Reading Kafka for the simulator: topic end offsets at run start, and a run's records.

Thin adapter around confluent-kafka; clients are created inside the functions, never at import.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
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
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
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
    """Read ``topic`` from ``start`` (None: the beginning) to its end; keep what ``want`` accepts.

    After reaching the end, when ``keep_going(kept)`` says more is expected, keep reading new
    records for up to ``wait_s`` more seconds (the bridge may still be draining).
    """
    consumer = _consumer(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    kept: list[RawRecord] = []
    try:
        partitions = _partitions(consumer, topic, timeout)
        begin = {p: (start or {}).get(p, 0) for p in partitions}
        consumer.assign([TopicPartition(topic, p, begin[p]) for p in partitions])
        position = dict(begin)
        deadline: float | None = None
        while True:
            ends = _watermarks(admin, topic, partitions, timeout)
            behind = {p for p in partitions if position[p] < ends[p]}
            while behind:
                batch = consumer.consume(num_messages=10000, timeout=0.2)
                if not batch:
                    # offsets may skip (control records): trust the consumer's position
                    for tp in consumer.position([TopicPartition(topic, p) for p in behind]):
                        if tp.offset >= 0:
                            position[tp.partition] = max(position[tp.partition], tp.offset)
                        if position[tp.partition] >= ends[tp.partition]:
                            behind.discard(tp.partition)
                for msg in batch:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise VerifyError(f"reading {topic}: {err}")
                    p = msg.partition()
                    offset = msg.offset()
                    assert p is not None  # a fetched record has both
                    assert offset is not None
                    position[p] = offset + 1
                    if position[p] >= ends[p]:
                        behind.discard(p)
                    _kind, ts = msg.timestamp()
                    value = msg.value() or b""
                    rec = RawRecord(
                        topic=topic,
                        partition=p,
                        offset=offset,
                        timestamp=ts,
                        key=msg.key(),
                        value=value,
                        headers=_headers(msg.headers()),
                    )
                    if want(rec):
                        kept.append(rec)
            if keep_going is None or not keep_going(kept):
                break
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait_s
            if now >= deadline:
                break
            time.sleep(min(0.5, deadline - now))
        return kept
    finally:
        consumer.close()
