"""Kafka as the console sees it (blocking; run in threads): topics with offsets, consumer
groups with lag, browsing records, producing replays and audit records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from api.console.group_offsets import GroupOffsets, GroupOffsetsError
from api.console.kafka_records import (
    SCAN_BUDGET_S,
    SCAN_CHUNK,
    SCAN_MAX_RECORDS,
    Raw,
    Scan,
    as_json,
)
from api.console.shared_read import SharedRead
from api.plumbing.kafka_batch import take
from api.plumbing.kafka_renew import Renewing, wait_all
from appconfig.kafka_security import client_base, delivery_timeouts


class KafkaDownError(Exception):
    """Kafka did not answer in time."""


class KafkaView:
    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        # every read of offsets goes through it (no long-lived consumer that nothing renews)
        self.admin: Renewing[AdminClient] = Renewing(
            "console-admin",
            lambda: AdminClient({**client_base(bootstrap), "client.id": "iot-console"}),
            failures=1,  # at its first timeout: the pages wait on it (issue 32: it wedges)
        )
        self._producer: Producer | None = None
        self.groups = SharedRead(self._groups)  # the sampler's and the pages' reads, shared
        self.groups_partial = False  # the last listing had a node's error (a coordinator loading)
        self.group_offsets = GroupOffsets(  # not self.admin: librdkafka#5040 crashes its process
            {**client_base(bootstrap), "client.id": "iot-console-groups"}, timeout_s
        )

    def start(self) -> None:
        self.admin.start()
        self._producer = Producer(
            {**client_base(self.bootstrap), "acks": "all", "enable.idempotence": True,
             **delivery_timeouts(10000), "partitioner": "murmur2_random"}
        )  # fmt: skip

    def _reader(self) -> Consumer:
        """A consumer of its own for one read (browse, scan back, read one): a group nobody
        shares, nothing committed, end of partition reported."""
        return Consumer(
            {**client_base(self.bootstrap),
             "group.id": f"iot-console-probe-{uuid.uuid4().hex}",
             "enable.auto.commit": False, "enable.partition.eof": True}
        )  # fmt: skip

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
        self.admin.close()
        self.group_offsets.close()
        self._producer = None

    def _meta(self) -> Any:
        try:
            wait = self.timeout_s  # any node may answer: a silent one is left (issue 33)
            return self.admin.call(lambda a: a.list_topics(timeout=wait), fresh_retry=True)
        except KafkaException as exc:
            raise KafkaDownError(f"Kafka does not answer: {exc}") from exc

    def ensure_topic(self, name: str, partitions: int = 1) -> None:
        if name in self._meta().topics:
            return
        try:
            self.admin.call(
                lambda a: a.create_topics([NewTopic(name, partitions)])[name].result(self.timeout_s)
            )
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def _offsets(
        self, parts: list[TopicPartition], spec: OffsetSpec, *, partial: bool = False
    ) -> dict[tuple[str, int], int]:
        """Each partition's earliest or latest offset, asked at once, not one after the other;
        ``partial``: a partition that failed (a deleted topic) is left out, not fatal."""
        if not parts:
            return {}
        try:
            found = self.admin.call(lambda a: wait_all(a.list_offsets(dict.fromkeys(parts, spec),
                request_timeout=self.timeout_s), self.timeout_s + 1))  # fmt: skip
        except (KafkaException, TimeoutError) as exc:
            raise KafkaDownError(f"Kafka does not answer: {exc!r}") from exc
        bad = [r for r in found.values() if isinstance(r, BaseException)]
        if bad and not partial:
            raise KafkaDownError(f"Kafka does not answer: {bad[0]!r}")
        return {(tp.topic, tp.partition): int(r.offset) for tp, r in found.items()
                if not isinstance(r, BaseException)}  # fmt: skip

    def topics(self) -> list[dict[str, Any]]:
        meta = self._meta().topics
        names = [n for n in sorted(meta) if meta[n].error is None and not n.startswith("__")]
        parts = [TopicPartition(n, p) for n in names for p in sorted(meta[n].partitions)]
        lows = self._offsets(parts, OffsetSpec.earliest())
        highs = self._offsets(parts, OffsetSpec.latest())
        out = []
        for name in names:
            found = [{"partition": p, "low": lows[(name, p)], "high": highs[(name, p)]}
                     for p in sorted(meta[name].partitions)]  # fmt: skip
            records = sum(x["high"] - x["low"] for x in found)
            out.append({"name": name, "partitions": found, "records": records})
        return out

    def _groups(self) -> list[dict[str, Any]]:
        """Consumer groups with committed offsets and lag per topic, asked at once (issue 32);
        a group whose offsets Kafka refused (its coordinator still loading) has ``error``."""
        try:
            listed = self.admin.call(lambda a: a.list_consumer_groups(
                request_timeout=self.timeout_s).result(self.timeout_s + 1.0))  # fmt: skip
            self.groups_partial = bool(listed.errors)  # the sampler asks again at once
            wanted = sorted((g for g in listed.valid
                             if not g.group_id.startswith("iot-console-probe-")),
                            key=lambda g: g.group_id)  # fmt: skip
            committed = self.group_offsets.committed([g.group_id for g in wanted])
        except (KafkaException, TimeoutError, GroupOffsetsError) as exc:
            raise KafkaDownError(f"Kafka does not answer: {exc!r}") from exc
        offsets = {g: r for g, r in committed.items() if isinstance(r, list)}
        asked = {(t, p) for tps in offsets.values() for t, p, _ in tps}
        highs = self._offsets([TopicPartition(t, p) for t, p in sorted(asked)],
                              OffsetSpec.latest(), partial=True)  # fmt: skip
        out = []
        for g in wanted:
            state, lag = getattr(g.state, "name", str(g.state)), dict[str, int]()
            found = committed.get(g.group_id, (KafkaError._TIMED_OUT, "not answered"))
            if isinstance(found, tuple):  # not read: gone since (left out), or not yet (said)
                if found[0] != KafkaError.GROUP_ID_NOT_FOUND:
                    out.append({"group": g.group_id, "state": state, "lag": lag,
                                "total_lag": 0, "error": found[1]})  # fmt: skip
                continue
            for topic, partition, offset in found:
                if (high := highs.get((topic, partition))) is not None:
                    lag[topic] = lag.get(topic, 0) + max(0, high - offset)
            out.append({"group": g.group_id, "state": state, "lag": lag,
                        "total_lag": sum(lag.values())})  # fmt: skip
        return out

    def browse(
        self,
        topic: str,
        *,
        partition: int | None = None,
        offset: int | None = None,
        at_ms: int | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records: the latest (per partition, newest first), or from an
        offset (one partition) or a time."""
        meta = self._meta().topics.get(topic)
        if meta is None or meta.error is not None:
            raise KeyError(topic)
        wanted = [partition] if partition is not None else sorted(meta.partitions)
        reader = self._reader()
        try:
            ranges: dict[int, tuple[int, int]] = {}
            if at_ms is not None:
                asked = [TopicPartition(topic, p, at_ms) for p in wanted]
                found = reader.offsets_for_times(asked, timeout=self.timeout_s)
            for i, p in enumerate(wanted):
                low, high = reader.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.timeout_s
                )
                if at_ms is not None:
                    start = found[i].offset if found[i].offset >= 0 else high
                elif offset is not None:
                    start = min(max(offset, low), high)
                else:
                    start = max(low, high - limit)
                if start < high:
                    ranges[p] = (start, high)
            if not ranges:
                return []
            deadline = time.monotonic() + self.timeout_s
            # a record written after the end was taken is kept too (browsing shows it)
            got = _read_ranges(reader, topic, ranges, deadline, past_end=True)
            records = [as_json(r) for r in got]
            if offset is None and at_ms is None:  # latest: the newest first
                records.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
            else:
                records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
            return records[:limit]
        finally:
            reader.close()

    def _range(
        self,
        reader: Consumer,
        topic: str,
        parts: list[int],
        since_ms: int | None,
        until_ms: int | None,
    ) -> dict[int, tuple[int, int]]:
        """Per partition the offsets [lo, hi) holding records of [since_ms, until_ms]."""
        out: dict[int, tuple[int, int]] = {}
        marks = {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout_s)
            for p in parts
        }

        def at(ms: int | None, default: str) -> dict[int, int]:
            if ms is None:
                return {p: marks[p][0 if default == "low" else 1] for p in parts}
            found = reader.offsets_for_times(
                [TopicPartition(topic, p, ms) for p in parts], timeout=self.timeout_s
            )
            return {tp.partition: tp.offset if tp.offset >= 0 else marks[tp.partition][1]
                    for tp in found}  # fmt: skip

        los, his = at(since_ms, "low"), at(None if until_ms is None else until_ms + 1, "high")
        for p in parts:
            low, high = marks[p]
            lo, hi = max(low, los[p]), min(high, his[p])
            if lo < hi:
                out[p] = (lo, hi)
        return out

    def scan_back(
        self,
        topic: str,
        match: Callable[[Raw], bool],
        enough: Callable[[list[Raw]], bool],
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        max_records: int = SCAN_MAX_RECORDS,
        chunk: int = SCAN_CHUNK,
        budget_s: float = SCAN_BUDGET_S,
    ) -> Scan:
        """Read ``topic`` from its end backwards (``chunk`` records per partition a round),
        within [since_ms, until_ms] (found with offsets_for_times), keeping the records
        ``match`` accepts, until ``enough`` says so or ``max_records``/``budget_s`` run out."""
        meta = self._meta().topics.get(topic)
        if meta is None or meta.error is not None:
            return Scan([], 0, True, None)  # not created yet: nothing to find
        reader = self._reader()
        matched: list[Raw] = []
        scanned, oldest = 0, None
        deadline = time.monotonic() + budget_s
        try:
            todo = self._range(reader, topic, sorted(meta.partitions), since_ms, until_ms)
            while todo and scanned < max_records and time.monotonic() < deadline:
                rounds = {p: (max(lo, hi - chunk), hi) for p, (lo, hi) in todo.items()}
                found = _read_ranges(reader, topic, rounds, deadline)
                scanned += len(found)
                for raw in found:
                    oldest = raw.timestamp if oldest is None else min(oldest, raw.timestamp)
                matched += [r for r in found if match(r)]
                matched.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
                todo = {p: (lo, rounds[p][0]) for p, (lo, _) in todo.items()
                        if lo < rounds[p][0]}  # fmt: skip
                if enough(matched):
                    break
            return Scan(matched, scanned, not todo, oldest)
        finally:
            reader.close()

    def read_one(self, topic: str, partition: int, offset: int) -> Raw | None:
        """The record at ``offset`` of ``topic``/``partition`` (None: not there any more)."""
        reader = self._reader()
        try:
            found = _read_ranges(
                reader, topic, {partition: (offset, offset + 1)},
                time.monotonic() + self.timeout_s,
            )  # fmt: skip
        finally:
            reader.close()
        return next((r for r in found if r.offset == offset), None)

    def produce(
        self, topic: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]]
    ) -> tuple[int, int]:
        """Write one record and wait for Kafka's acknowledgement: (partition, offset)."""
        assert self._producer is not None
        result: dict[str, Any] = {}

        def done(err: KafkaError | None, msg: Any) -> None:
            result["err"], result["msg"] = err, msg

        self._producer.produce(topic, value=value, key=key, headers=list(headers), on_delivery=done)
        self._producer.flush(self.timeout_s * 2)
        if result.get("err") is not None or "msg" not in result:
            raise KafkaDownError(f"writing to {topic} failed: {result.get('err', 'timed out')}")
        return int(result["msg"].partition()), int(result["msg"].offset())

    def topic_names(self) -> list[str]:
        return sorted(self._meta().topics)

    def ping(self) -> bool:
        try:
            self._meta()
        except KafkaDownError:
            return False
        return True

    def forget_group_offsets(self) -> None:
        """Kafka did not answer: the groups' first read after it is back starts from a fresh
        admin client, not from one that lived through the outage (librdkafka#5511)."""
        self.group_offsets.forget()


def _read_ranges(
    reader: Consumer,
    topic: str,
    ranges: dict[int, tuple[int, int]],
    deadline: float,
    *,
    past_end: bool = False,
) -> list[Raw]:
    """The records of each partition's [start, end) of ``topic``, read until every partition
    reached its end (a record at or past ``end``, or the partition's end: compacted topics
    have holes) or ``deadline``. ``past_end``: keep the records at or past ``end`` that came
    in the same fetch (written since ``end`` was taken) instead of dropping them."""
    reader.assign([TopicPartition(topic, p, start) for p, (start, _) in ranges.items()])
    done: set[int] = set()
    out: list[Raw] = []
    while len(done) < len(ranges) and time.monotonic() < deadline:
        for msg in take(reader, 1000, 0.5):  # at once what is fetched: no 0.5 s per batch
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done.add(p)
                continue
            offset, end = msg.offset() or 0, ranges[p][1]
            if past_end or (offset < end and p not in done):
                out.append(Raw(p, offset, msg.key(), msg.value(), msg.headers(),
                               msg.timestamp()[1]))  # fmt: skip
            if offset + 1 >= end:
                done.add(p)
    reader.unassign()
    return out


__all__ = ["OFFSET_END", "KafkaDownError", "KafkaView"]
