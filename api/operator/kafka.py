"""The command path's topics for iot-api's operator routes (blocking; run in threads): send a
command (the command path's own client, so records are keyed and partitioned as ``iot-cmd``
writes them, with the sender's ``tenant`` header), read one command's last status from the
compacted status topic, and scan the status topic by time for the history.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from api.console.fleet import FleetState
from api.operator.model import SendRequest, status_tenant
from api.plumbing.kafka_admin import KafkaUnavailableError
from api.plumbing.kafka_batch import take
from appconfig.kafka_security import client_base, delivery_timeouts
from commands.client import CommandClient, command_record, new_command_id
from commands.status import status_fields
from registry.ids import DEFAULT_TENANT

_READ_S = 20.0
_SEND_S = 15.0


class CommandPath:
    def __init__(self, bootstrap: str, commands: str, status: str, replies: str) -> None:
        self.bootstrap = bootstrap
        self.status_topic = status
        self.commands_topic = commands
        self._producer = Producer(
            {**client_base(bootstrap), "acks": "all", "enable.idempotence": True,
             "partitioner": "murmur2_random", "linger.ms": 0,
             **delivery_timeouts(int(_SEND_S * 1000))}
        )  # fmt: skip
        self._client = CommandClient(
            bootstrap,
            topic_commands=commands,
            topic_status=status,
            topic_replies=replies,
        )

    def send(self, wanted: SendRequest) -> str:
        """Write the command; returns once Kafka acknowledged it (acks=all), else raises
        :class:`KafkaUnavailableError`. Keyed and partitioned (murmur2) as ``iot-cmd`` does."""
        cid = wanted.command_id or new_command_id()
        doc = command_record(
            cid, wanted.name, wanted.args, timeout_ms=wanted.timeout_ms,
            max_attempts=wanted.max_attempts, reply_expected=wanted.reply_expected,
            ttl_ms=wanted.ttl_ms,
        )  # fmt: skip
        headers: list[tuple[str, str | bytes | None]] = (
            [] if wanted.tenant == DEFAULT_TENANT else [("tenant", wanted.tenant.encode())]
        )
        done = threading.Event()
        failed: list[str] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            done.set()

        self._producer.produce(
            self.commands_topic, key=wanted.key.encode(), value=orjson.dumps(doc),
            headers=headers, on_delivery=delivered,
        )  # fmt: skip
        deadline = time.monotonic() + _SEND_S
        while not done.is_set() and time.monotonic() < deadline:
            self._producer.poll(0.05)
        if failed or not done.is_set():
            raise KafkaUnavailableError(f"the command was not written: {failed or 'timed out'}")
        return cid

    def last_status(self, command_id: str) -> dict[str, Any] | None:
        """One command's last status read from Kafka (older than the feed's window)."""
        found = self._client.status(command_id, timeout_s=_READ_S)
        if found is None:
            return None
        doc = status_fields(found)
        command = dict(found.command or {})
        entry = {**doc, "states": [{"state": doc["state"], "at": doc["at"],
                                    "detail": doc["detail"]}], "replies": [],
                 "name": command.get("name"), "args": command.get("args")}  # fmt: skip
        entry["tenant"] = status_tenant({"command": found.command}) if found.command else None
        return entry

    def history(
        self, since_ms: int | None, until_ms: int | None, max_records: int
    ) -> list[dict[str, Any]]:
        """The commands whose status records fall in [since, until], folded per command (the
        status topic is compacted: a command's older states may be gone); at most
        ``max_records`` records read, the newest of each partition."""
        consumer = Consumer(
            {**client_base(self.bootstrap),
             "group.id": f"iot-api-history-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )  # fmt: skip
        state = FleetState()
        try:
            try:
                meta = consumer.list_topics(self.status_topic, timeout=10)
            except KafkaException as exc:
                raise KafkaUnavailableError(str(exc)) from exc
            topic = meta.topics.get(self.status_topic)
            if topic is None or topic.error is not None or not topic.partitions:
                return []
            ends: dict[int, int] = {}
            starts = []
            for p in topic.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.status_topic, p), timeout=10
                )
                if high <= low:
                    continue
                ends[p] = high
                starts.append(TopicPartition(self.status_topic, p, since_ms or low))
            if since_ms is not None and starts:
                starts = consumer.offsets_for_times(starts, timeout=10)
            # a partition with nothing at or after `since` starts at its end; none reads more
            # than its share of `max_records`, the newest (the answer is newest first)
            share = max(1, max_records // max(1, len(ends)))
            starts = [
                TopicPartition(tp.topic, p, max(tp.offset if tp.offset >= 0 else ends[p],
                                                ends[p] - share))
                for tp in starts
                for p in [tp.partition]
            ]  # fmt: skip
            todo = {tp.partition for tp in starts if tp.offset < ends[tp.partition]}
            if not todo:
                return []
            consumer.assign([tp for tp in starts if tp.partition in todo])
            tenants: dict[str, str] = {}
            read, deadline = 0, time.monotonic() + _READ_S
            while todo and read < max_records and time.monotonic() < deadline:
                for msg in take(consumer, 1000, 0.5):
                    if msg.error() is not None:
                        continue
                    p, offset = msg.partition() or 0, msg.offset() or 0
                    if offset + 1 >= ends.get(p, 0):
                        todo.discard(p)
                    if offset >= ends.get(p, 0):
                        continue
                    read += 1
                    ts = msg.timestamp()[1]
                    if until_ms is not None and ts > until_ms:
                        continue
                    state.apply("status", partition=p, offset=offset, key=msg.key(),
                                value=msg.value(), headers=None, timestamp=ts)  # fmt: skip
                    _tenant_of(msg.value(), tenants)
        finally:
            consumer.close()
        out = []
        for cid, entry in state.commands.items():
            out.append({**entry, "tenant": tenants.get(cid)})
        return out

    def close(self) -> None:
        self._producer.flush(5)
        self._client.close()


def _tenant_of(value: bytes | None, tenants: dict[str, str]) -> None:
    try:
        doc = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return
    if isinstance(doc, dict):
        tenant = status_tenant(doc)
        if tenant is not None:
            tenants[str(doc.get("command_id"))] = tenant
