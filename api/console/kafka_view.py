"""Kafka as the console sees it (blocking; run in threads): topics with offsets, consumer
groups with lag, browsing records, producing replays and audit records."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


class KafkaDownError(Exception):
    """Kafka did not answer in time."""


def _pretty(value: bytes | None) -> tuple[str, bool]:
    if value is None:
        return "", False
    try:
        return orjson.dumps(orjson.loads(value), option=orjson.OPT_INDENT_2).decode(), True
    except orjson.JSONDecodeError:
        pass
    try:
        return value.decode("utf-8"), False
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode(), False


class KafkaView:
    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._probe: Consumer | None = None
        self._lock = threading.Lock()  # the probe consumer is not shared across threads

    def start(self) -> None:
        base = {"bootstrap.servers": self.bootstrap}
        self._admin = AdminClient({**base, "client.id": "iot-console"})
        self._producer = Producer(
            {**base, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 10000,
             "partitioner": "murmur2_random"}
        )  # fmt: skip
        self._probe = Consumer(
            {**base, "group.id": f"iot-console-probe-{uuid.uuid4().hex}",
             "enable.auto.commit": False}
        )  # fmt: skip

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
        if self._probe is not None:
            self._probe.close()
        self._admin = self._producer = self._probe = None

    def _meta(self) -> Any:
        assert self._admin is not None, "start() first"
        try:
            return self._admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise KafkaDownError(f"Kafka does not answer: {exc}") from exc

    def ensure_topic(self, name: str, partitions: int = 1) -> None:
        if name in self._meta().topics:
            return
        assert self._admin is not None
        future = self._admin.create_topics([NewTopic(name, partitions)])[name]
        try:
            future.result(self.timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def _marks(self, topic: str, partition: int) -> tuple[int, int]:
        assert self._probe is not None
        low, high = self._probe.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout_s
        )
        return int(low), int(high)

    def topics(self) -> list[dict[str, Any]]:
        meta = self._meta()
        out = []
        with self._lock:
            for name in sorted(meta.topics):
                t = meta.topics[name]
                if t.error is not None or name.startswith("__"):
                    continue
                parts = []
                for p in sorted(t.partitions):
                    low, high = self._marks(name, p)
                    parts.append({"partition": p, "low": low, "high": high})
                records = sum(x["high"] - x["low"] for x in parts)
                out.append({"name": name, "partitions": parts, "records": records})
        return out

    def groups(self) -> list[dict[str, Any]]:
        """Consumer groups with committed offsets and lag per topic."""
        assert self._admin is not None
        try:
            listed = self._admin.list_consumer_groups(request_timeout=self.timeout_s).result()
        except KafkaException as exc:
            raise KafkaDownError(f"Kafka does not answer: {exc}") from exc
        out = []
        for g in sorted(listed.valid, key=lambda x: x.group_id):
            if g.group_id.startswith("iot-console-probe-"):
                continue
            req = [ConsumerGroupTopicPartitions(g.group_id)]
            try:
                res = self._admin.list_consumer_group_offsets(req)[g.group_id].result(
                    self.timeout_s
                )
            except KafkaException:
                continue
            lag: dict[str, int] = {}
            with self._lock:
                for tp in res.topic_partitions or []:
                    if tp.offset < 0:
                        continue
                    _, high = self._marks(tp.topic, tp.partition)
                    lag[tp.topic] = lag.get(tp.topic, 0) + max(0, high - tp.offset)
            state = getattr(g.state, "name", str(g.state))
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
        reader = Consumer(
            {"bootstrap.servers": self.bootstrap,
             "group.id": f"iot-console-probe-{uuid.uuid4().hex}",
             "enable.auto.commit": False, "enable.partition.eof": True}
        )  # fmt: skip
        try:
            starts: list[TopicPartition] = []
            ends: dict[int, int] = {}
            if at_ms is not None:
                asked = [TopicPartition(topic, p, at_ms) for p in wanted]
                found = reader.offsets_for_times(asked, timeout=self.timeout_s)
            for i, p in enumerate(wanted):
                low, high = reader.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.timeout_s
                )
                ends[p] = high
                if at_ms is not None:
                    start = found[i].offset if found[i].offset >= 0 else high
                elif offset is not None:
                    start = min(max(offset, low), high)
                else:
                    start = max(low, high - limit)
                if start < high:
                    starts.append(TopicPartition(topic, p, start))
            if not starts:
                return []
            reader.assign(starts)
            done: set[int] = set()
            records: list[dict[str, Any]] = []
            deadline = time.monotonic() + self.timeout_s
            while len(done) < len(starts) and time.monotonic() < deadline:
                for msg in reader.consume(500, 0.5):
                    p = msg.partition() or 0
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done.add(p)
                        continue
                    records.append(_record(msg))
                    if (msg.offset() or 0) + 1 >= ends[p]:
                        done.add(p)
            if offset is None and at_ms is None:  # latest: the newest first
                records.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
            else:
                records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
            return records[:limit]
        finally:
            reader.close()

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

    def ping(self) -> bool:
        try:
            self._meta()
            return True
        except KafkaDownError:
            return False


def _record(msg: Any) -> dict[str, Any]:
    text, is_json = _pretty(msg.value())
    key = msg.key()
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
        "key": key.decode("utf-8", "replace") if key is not None else None,
        "headers": {k: (v or b"").decode("utf-8", "replace") for k, v in msg.headers() or []},
        "value": text,
        "json": is_json,
    }


__all__ = ["OFFSET_END", "KafkaDownError", "KafkaView"]
