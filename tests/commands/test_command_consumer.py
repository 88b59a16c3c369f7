"""Unit tests: the iot.commands consumer with a fake Kafka consumer."""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import KafkaError, TopicPartition

from commands.command_consumer import CommandConsumer
from commands.config import CommandConfig
from commands.model import Command, CommandDefaults, Rejection, Source


class FakeMessage:
    def __init__(self, partition: int, offset: int, key: bytes, value: bytes, error: Any = None):
        self._p, self._o, self._k, self._v, self._e = partition, offset, key, value, error

    def error(self) -> Any:
        return self._e

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return self._k

    def value(self) -> bytes:
        return self._v

    def timestamp(self) -> tuple[int, int]:
        return (1, 5_000)

    def topic(self) -> str:
        return "iot.commands"

    def headers(self) -> list[tuple[str, bytes]] | None:
        return None


class FakeTopic:
    partitions = (0, 1, 2)


class FakeConsumer:
    def __init__(self, msgs: list[FakeMessage]) -> None:
        self.msgs = msgs
        self.stored: list[TopicPartition] = []
        self.paused = False

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        batch, self.msgs = self.msgs[:n], self.msgs[n:]
        return batch

    def store_offsets(self, offsets: list[TopicPartition]) -> None:
        self.stored += offsets

    def assignment(self) -> list[TopicPartition]:
        return []

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused = True

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        return type("Meta", (), {"topics": {topic: FakeTopic()}})()


def rig(
    msgs: list[FakeMessage],
) -> tuple[CommandConsumer, FakeConsumer, list[tuple[str, set[int]]]]:
    calls: list[tuple[str, set[int]]] = []
    consumer = CommandConsumer(
        CommandConfig(pending_max_messages=10),
        CommandDefaults(),
        on_assign=lambda ps: calls.append(("assign", ps)),
        on_revoke=lambda ps: calls.append(("revoke", ps)),
    )
    fake = FakeConsumer(msgs)
    consumer._consumer = fake  # type: ignore[assignment]
    return consumer, fake, calls


def good(cid: str) -> bytes:
    return orjson.dumps({"command_id": cid, "name": "reboot"})


def test_records_are_validated_and_their_offsets_stored_once_done_in_order() -> None:
    consumer, fake, _ = rig(
        [
            FakeMessage(0, 7, b"d1", good("c1")),
            FakeMessage(0, 8, b"d1", b"", KafkaError(KafkaError._PARTITION_EOF)),
            FakeMessage(0, 8, b"d1", b"{nope"),
            FakeMessage(0, 9, b"d2", good("c3")),
        ]
    )
    records = consumer.poll(now=1_000)
    assert [s for s, _ in records] == [Source(0, 7), Source(0, 8), Source(0, 9)]
    assert isinstance(records[0][1], Command)
    assert records[0][1].created_at == 5_000  # the record's timestamp
    assert isinstance(records[1][1], Rejection)
    consumer.release(Source(0, 8))
    assert fake.stored == []
    consumer.release(Source(0, 7))
    assert [(tp.partition, tp.offset) for tp in fake.stored] == [(0, 9)]


def test_rebalance_updates_offsets_and_tells_the_service() -> None:
    consumer, fake, calls = rig([])
    consumer._assigned(fake, [TopicPartition("iot.commands", 0), TopicPartition("iot.commands", 2)])  # type: ignore[arg-type]
    assert consumer.offsets.assigned == {0, 2}
    assert consumer.offsets.partition_count == 3
    consumer._revoked(fake, [TopicPartition("iot.commands", 2)])  # type: ignore[arg-type]
    assert consumer.offsets.assigned == {0}
    assert calls == [("assign", {0, 2}), ("revoke", {2})]


def test_reading_pauses_at_the_pending_bound_and_resumes_below_80_percent() -> None:
    consumer, fake, _ = rig([])
    consumer.flow_control(10)
    assert fake.paused
    consumer.flow_control(8)
    assert fake.paused
    consumer.flow_control(7)
    assert not fake.paused
