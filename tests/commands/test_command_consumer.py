"""Unit tests: the iot.commands consumer with a fake Kafka consumer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import orjson
import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition

from commands import command_consumer
from commands.command_consumer import CommandConsumer
from commands.config import CommandConfig
from commands.model import Command, CommandDefaults, Rejection, Source
from kafka_watch import consumer as kafka_consumer
from tests.conftest import Endpoints


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


class StalledConsumer(FakeConsumer):
    """Partition 0 assigned, records up to offset 9 there, its position stuck at 2."""

    made: ClassVar[list[StalledConsumer]] = []

    def __init__(self, settings: Any = None) -> None:
        super().__init__([])
        self.subscribed: list[str] = []
        StalledConsumer.made.append(self)

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.subscribed = topics

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("iot.commands", 0)]

    def offsets_for_times(self, parts: list[TopicPartition], timeout: float) -> list[Any]:
        return [TopicPartition(p.topic, p.partition, 9) for p in parts]

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, 2) for p in parts]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> tuple[CommandConsumer, Clock, list[Any]]:
    clock = Clock()
    monkeypatch.setattr(command_consumer, "time", clock)
    monkeypatch.setattr(kafka_consumer, "time", clock)
    monkeypatch.setattr(command_consumer, "Consumer", StalledConsumer)
    monkeypatch.setattr(command_consumer.retired, "retire_member", lambda c, closed=None: None)
    StalledConsumer.made = []
    calls: list[Any] = []
    consumer = CommandConsumer(
        CommandConfig(pending_max_messages=10, command_consumer_stall_s=30.0),
        CommandDefaults(),
        on_assign=lambda ps: calls.append(("assign", ps)),
        on_revoke=lambda ps: calls.append(("revoke", ps)),
        stats={},
    )
    consumer.subscribe()
    consumer._assigned(StalledConsumer.made[0], [TopicPartition("iot.commands", 0)])  # type: ignore[arg-type]
    return consumer, clock, calls


def test_a_member_that_stalls_is_replaced_by_a_new_member_of_its_group(
    stalled: tuple[CommandConsumer, Clock, list[Any]],
) -> None:
    consumer, clock, calls = stalled
    for _ in range(4):  # a check every 10 s: behind at the same position for 30 s
        clock.now += 10
        consumer.poll(now=1)
    assert len(StalledConsumer.made) == 2  # a new member subscribed
    assert StalledConsumer.made[1].subscribed == ["iot.commands"]
    assert consumer.stall.renewals == 1
    assert consumer._stats == {"consumer_renewals": 1}
    assert calls == [("assign", {0}), ("revoke", {0})]  # its partitions revoked as in a rebalance
    assert consumer.offsets.assigned == set()
    old = StalledConsumer.made[0]
    consumer._assigned(old, [TopicPartition("iot.commands", 0)])  # type: ignore[arg-type]
    assert consumer.offsets.assigned == set()  # the replaced member's callbacks no longer act


def test_a_member_paused_by_flow_control_is_never_judged_stalled(
    stalled: tuple[CommandConsumer, Clock, list[Any]],
) -> None:
    consumer, clock, _ = stalled
    consumer.flow_control(10)
    for _ in range(10):
        clock.now += 10
        consumer.poll(now=1)
    assert len(StalledConsumer.made) == 1
    consumer.flow_control(0)  # resumed: judged afresh, from its next check
    for _ in range(3):
        clock.now += 10
        consumer.poll(now=1)
    assert len(StalledConsumer.made) == 1
    clock.now += 10
    consumer.poll(now=1)
    assert len(StalledConsumer.made) == 2


@pytest.mark.integration
def test_a_wedged_commands_consumer_is_replaced_and_the_commands_arrive(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """A wedged consumer raises nothing: here the first member's partitions are paused once it
    has them, so it fetches nothing while commands arrive. The stall check finds it within
    command_consumer_stall_s (+ a check) and a new member of the same group, starting at the
    group's commit, reads every command; without the check none would ever come."""
    topic = topic_factory("cmd-stall", partitions=2)
    config = CommandConfig(kafka_bootstrap=stack.kafka_bootstrap, topic_commands=topic,
                           command_group_id=group_factory(),
                           command_consumer_stall_s=4.0)  # fmt: skip
    consumer = CommandConsumer(config, CommandDefaults(), on_assign=lambda _: None,
                               on_revoke=lambda _: None, stats={})  # fmt: skip
    consumer.subscribe()
    read: list[Source] = []
    try:
        deadline = time.monotonic() + 30
        while consumer.offsets.assigned != {0, 1} and time.monotonic() < deadline:
            read += [s for s, _ in consumer.poll(now=1)]
        first = consumer._consumer
        assert first is not None
        assert consumer.offsets.assigned == {0, 1}, "never assigned"
        first.pause(first.assignment())  # wedged: it fetches nothing from now on
        del first  # held here, it would never be freed: the group would wait for it
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        for i in range(20):
            producer.produce(topic, key=f"d{i % 5}".encode(), value=good(f"c{i}"))
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 40  # stall_s + a check + a new member's join, loaded
        while len({(s.partition, s.offset) for s in read}) < 20 and time.monotonic() < deadline:
            read += [s for s, _ in consumer.poll(now=1)]
            time.sleep(0.01)
        assert len({(s.partition, s.offset) for s in read}) == 20
        assert consumer.stall.renewals >= 1  # read by a new member, not by the paused one
    finally:
        consumer.close()
