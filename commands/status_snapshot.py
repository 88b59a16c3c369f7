"""Read ``iot.command-status`` to its end: the last status of every command.

At start (and after a rebalance) the command service adopts what is still pending from it.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from bridge.kafka_settings import consumer_security
from commands.client import topic_metadata, watermarks
from commands.config import CommandConfig
from commands.model import CommandPathError
from commands.status import StatusRecord, decode_status

__all__ = ["StatusSnapshot", "read_status_snapshot"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class StatusSnapshot:
    """The last status of every command id found in ``iot.command-status``."""

    statuses: dict[str, StatusRecord]
    records: int
    seconds: float

    def pending(self) -> list[StatusRecord]:
        return [s for s in self.statuses.values() if not s.final]


def read_status_snapshot(
    config: CommandConfig, *, timeout_s: float = 60.0, topic: str | None = None
) -> StatusSnapshot:
    """Read the compacted status topic from its beginning to its current end."""
    topic = topic or config.topic_command_status
    started = time.monotonic()
    settings: dict[str, Any] = {
        "bootstrap.servers": config.kafka_bootstrap,
        "group.id": f"iot-cmd-snapshot-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    settings.update(consumer_security(config))
    consumer = Consumer(settings)
    statuses: dict[str, StatusRecord] = {}
    count = 0
    try:
        tmeta = topic_metadata(consumer, topic, timeout_s)
        ends: dict[int, int] = {}
        for p in tmeta.partitions:
            low, high = watermarks(consumer, topic, p, timeout_s)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = started + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise CommandPathError(f"reading {topic!r} to its end took more than {timeout_s}s")
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("status snapshot: %s", err)
                    continue
                count += 1
                key = msg.key()
                status = decode_status(key, msg.value())
                if status is not None:
                    statuses[status.command_id] = status
                elif msg.value() is None and key is not None:
                    statuses.pop(key.decode(errors="replace"), None)
                p = msg.partition()
                off = msg.offset()
                if p is not None and off is not None and p in ends and off + 1 >= ends[p]:
                    del ends[p]
    finally:
        consumer.close()
    return StatusSnapshot(statuses, count, time.monotonic() - started)
