"""A small Kafka-side client of the command path: send commands, read and follow statuses.

Used by ``iot-cmd``, the tests and the benchmark. It speaks only Kafka (``iot.commands``,
``iot.command-status``, ``iot.command-replies``); the bridge does the MQTT side.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from bridge.partitioner import partition_for
from commands.model import CommandPathError
from commands.status import StatusRecord, decode_status

__all__ = [
    "CommandClient",
    "Tail",
    "command_record",
    "new_command_id",
    "topic_metadata",
    "watermarks",
]


def new_command_id() -> str:
    return uuid.uuid4().hex


def command_record(
    command_id: str,
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    timeout_ms: int | None = None,
    max_attempts: int | None = None,
    reply_expected: bool = True,
    ttl_ms: int | None = None,
) -> dict[str, Any]:
    """An ``iot.commands`` value; unset limits are left to the bridge's defaults."""
    doc: dict[str, Any] = {
        "command_id": command_id,
        "name": name,
        "args": dict(args or {}),
        "reply_expected": reply_expected,
    }
    if timeout_ms is not None:
        doc["timeout_ms"] = timeout_ms
    if max_attempts is not None:
        doc["max_attempts"] = max_attempts
    if ttl_ms is not None:
        doc["ttl_ms"] = ttl_ms
    return doc


def _consumer(bootstrap: str, extra: Mapping[str, str]) -> Consumer:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"iot-cmd-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        # wait up to 5 ms for more: a fetch per record (fetch.min.bytes=1) made following a
        # busy status topic cost the broker a fetch request per status
        "fetch.wait.max.ms": 5,
        "fetch.min.bytes": 1 << 20,
    }
    settings.update(extra)
    return Consumer(settings)


def watermarks(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
    """Low and high watermark; retried while a new topic's leader is being elected."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(0.1, deadline - time.monotonic())
            )
            return int(low), int(high)
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].code() not in _LEADER_ERRORS:
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def topic_metadata(consumer: Consumer, topic: str, timeout_s: float) -> Any:
    """A topic's metadata with its partitions; retried while a new topic settles."""
    deadline = time.monotonic() + timeout_s
    while True:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return meta
        if time.monotonic() > deadline:
            detail = "missing" if meta is None else meta.error
            raise CommandPathError(f"topic {topic!r} is not available: {detail}")
        time.sleep(0.1)


_LEADER_ERRORS = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)


class Tail:
    """Follow topics from their current end (or beginning), without a consumer group."""

    def __init__(
        self,
        bootstrap: str,
        topics: Iterable[str],
        *,
        from_beginning: bool = False,
        partitions: Mapping[str, Iterable[int]] | None = None,
        extra: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        starts: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        """``starts``: where a partition begins instead (a replaced Tail's positions)."""
        self._consumer = _consumer(bootstrap, extra or {})
        assignment: list[TopicPartition] = []
        self.ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            try:
                meta = topic_metadata(self._consumer, topic, timeout_s)
            except CommandPathError:
                self._consumer.close()
                raise
            wanted = (
                set(partitions[topic])
                if partitions and topic in partitions
                else set(meta.partitions)
            )
            for p in sorted(wanted):
                low, high = watermarks(self._consumer, topic, p, timeout_s)
                self.ends[(topic, p)] = high
                start = low if from_beginning else high
                start = (starts or {}).get((topic, p), start)
                assignment.append(TopicPartition(topic, p, start if start >= 0 else OFFSET_END))
        self._consumer.assign(assignment)

    @property
    def consumer(self) -> Consumer:
        """The assigned consumer (its stall check, kafka_watch)."""
        return self._consumer

    def poll(self, timeout: float) -> list[Message]:
        out = []
        for msg in self._consumer.consume(1000, timeout):
            err = msg.error()
            if err is None:
                out.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                raise CommandPathError(f"reading {msg.topic()}: {err}")
        return out

    def close(self) -> None:
        self._consumer.close()


class CommandClient:
    """Send commands to ``iot.commands`` and read their fate from ``iot.command-status``."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic_commands: str = "iot.commands",
        topic_status: str = "iot.command-status",
        topic_replies: str = "iot.command-replies",
        extra: Mapping[str, str] | None = None,
        linger_ms: int = 0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic_commands = topic_commands
        self.topic_status = topic_status
        self.topic_replies = topic_replies
        self._extra = dict(extra or {})
        self._settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": linger_ms,
        }
        self._settings.update(self._extra)
        # Made at the first send: a client that only reads statuses (iot-api's status lookup,
        # `iot-cmd status`) holds no producer and its threads.
        self._made: Producer | None = None
        self._errors: list[str] = []

    @property
    def _producer(self) -> Producer:
        if self._made is None:
            self._made = Producer(self._settings)
        return self._made

    def send(
        self,
        key: str,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        command_id: str | None = None,
        timeout_ms: int | None = None,
        max_attempts: int | None = None,
        reply_expected: bool = True,
        ttl_ms: int | None = None,
        flush: bool = True,
        tenant: str | None = None,
    ) -> str:
        """Write one command (key: device id or ``group:{name}``); return its id. ``tenant``:
        the sender's tenant, as the ``tenant`` header (none: the default tenant)."""
        cid = command_id or new_command_id()
        doc = command_record(
            cid,
            name,
            args,
            timeout_ms=timeout_ms,
            max_attempts=max_attempts,
            reply_expected=reply_expected,
            ttl_ms=ttl_ms,
        )
        headers: list[tuple[str, str | bytes | None]] | None = (
            None if tenant is None else [("tenant", tenant.encode())]
        )
        self.send_raw(key.encode(), orjson.dumps(doc), flush=flush, headers=headers)
        return cid

    def send_raw(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        flush: bool = True,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        """Write any record to ``iot.commands`` (also a malformed one)."""

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self._errors.append(str(err))

        while True:
            try:
                self._producer.produce(
                    self.topic_commands,
                    value=value,
                    key=key,
                    on_delivery=delivered,
                    headers=headers or [],
                )
                break
            except BufferError:
                self._producer.poll(0.05)
        self._producer.poll(0)
        if flush:
            self.flush()

    def flush(self, timeout: float = 30.0) -> None:
        left = self._made.flush(timeout) if self._made is not None else 0
        if left or self._errors:
            raise CommandPathError(
                f"writing to {self.topic_commands} failed: {left} unsent, errors {self._errors[:3]}"
            )

    def tail_status(self, *, from_beginning: bool = False) -> Tail:
        """Follow ``iot.command-status`` (start it before sending to miss nothing)."""
        return Tail(
            self.bootstrap, [self.topic_status], from_beginning=from_beginning, extra=self._extra
        )

    def tail_replies(self) -> Tail:
        return Tail(self.bootstrap, [self.topic_replies], extra=self._extra)

    def status(self, command_id: str, timeout_s: float = 30.0) -> StatusRecord | None:
        """The last status of ``command_id`` (reads its partition of the compacted topic)."""
        probe = _consumer(self.bootstrap, self._extra)
        try:
            meta = topic_metadata(probe, self.topic_status, timeout_s)
            count = len(meta.partitions)
        finally:
            probe.close()
        partition = partition_for(command_id.encode(), count)
        tail = Tail(
            self.bootstrap,
            [self.topic_status],
            from_beginning=True,
            partitions={self.topic_status: [partition]},
            extra=self._extra,
        )
        try:
            end = tail.ends[(self.topic_status, partition)]
            last: StatusRecord | None = None
            deadline = time.monotonic() + timeout_s
            position = -1
            while position + 1 < end:
                if time.monotonic() > deadline:
                    raise CommandPathError("timed out reading the status topic")
                for msg in tail.poll(0.2):
                    position = msg.offset() or 0
                    if msg.key() == command_id.encode():
                        status = decode_status(msg.key(), msg.value())
                        last = status if status is not None else last
            return last
        finally:
            tail.close()

    def close(self) -> None:
        """Flush what was sent and free the producer (confluent-kafka frees a client only with
        the object: a flushed one left referenced keeps its threads and reconnects)."""
        made, self._made = self._made, None
        if made is not None:
            made.flush(10)
