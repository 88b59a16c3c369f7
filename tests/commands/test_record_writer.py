"""Unit tests: the tracker's writes as Kafka records, and what their acknowledgement releases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from commands.actions import DeadLetterAction, ReplyAction, StatusAction
from commands.config import CommandConfig
from commands.model import Source, State
from commands.record_writer import RecordWriter
from commands.status import StatusRecord, decode_status


class FakeProducer:
    def __init__(self, full: int = 0) -> None:
        self.records: list[tuple[str, bytes, bytes, Callable[..., None]]] = []
        self.full = full  # how many produce() calls raise BufferError first
        self.polls = 0

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.records.append((topic, key, value, on_delivery))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def rig(full: int = 0) -> tuple[RecordWriter, FakeProducer, list[Source], list[tuple[int, int]]]:
    producer = FakeProducer(full)
    released: list[Source] = []
    acked: list[tuple[int, int]] = []
    stats = {"expired": 0}
    writer = RecordWriter(
        producer,  # type: ignore[arg-type]
        CommandConfig(),
        stats,
        release=released.append,
        ack_done=acked.append,
    )
    return writer, producer, released, acked


def test_a_status_releases_its_offset_and_counts_towards_the_reply_ack_once_written() -> None:
    writer, producer, released, acked = rig()
    status = StatusRecord("c1", State.SENT, 1, "d1", 5)
    writer.write(StatusAction(status, release=Source(2, 9)), (1, 77))
    topic, key, value, delivered = producer.records[0]
    assert (topic, key) == ("iot.command-status", b"c1")
    assert decode_status(key, value) == status
    assert released == []
    assert acked == []
    delivered(None, None)
    assert released == [Source(2, 9)]
    assert acked == [(1, 77)]


def test_a_failed_write_releases_nothing() -> None:
    writer, producer, released, acked = rig()
    writer.write(ReplyAction("d1", {"command_id": "c1"}), (1, 3))
    producer.records[0][3]("broker down", None)
    assert released == []
    assert acked == []


def test_replies_and_dead_letters_go_to_their_topics_keyed_by_device() -> None:
    writer, producer, _, _ = rig(full=2)
    writer.write(ReplyAction("d1", {"command_id": "c1"}), None)
    writer.write(DeadLetterAction("group:g", {"command_id": "c2"}), None)
    assert [(t, k) for t, k, _, _ in producer.records] == [
        ("iot.command-replies", b"d1"),
        ("iot.commands.dlq", b"group:g"),
    ]
    assert orjson.loads(producer.records[1][2]) == {"command_id": "c2"}
    assert producer.polls == 2  # a full queue is served until the record fits
