"""BufferedMember's re-assignment after a failed commit (api/plumbing/buffered_member.py),
without a broker: the consumer is a stand-in that records what it was told (the Kafka restart
that makes the commit fail is tests/stack/test_faults_integration.py's)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition

from api.mr.consumers import Fetched, GroupConsumer
from api.plumbing import buffered_member
from api.plumbing.buffered_member import BufferedMember
from kafka_watch import consumer as kafka_consumer
from kafka_watch.stall import StallJudge, StallTally
from tests.conftest import Endpoints


class _Consumer:
    def __init__(self, committed: dict[int, int] | None, commit_fails: bool = False) -> None:
        self._committed = committed
        self._commit_fails = commit_fails
        self.assigned: list[TopicPartition] | None = None
        self.commits: list[list[TopicPartition]] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self._committed is None:
            raise KafkaException("coordinator not available")
        return [TopicPartition(p.topic, p.partition, self._committed.get(p.partition, -1001))
                for p in partitions]  # fmt: skip

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        if self._commit_fails:
            raise KafkaException("coordinator not available")
        self.commits.append(offsets)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions


class _Member(BufferedMember[Fetched]):
    def _record(self, msg: Any) -> Fetched | None:
        return None


def _handed(member: _Member, consumer: _Consumer, records: list[Fetched]) -> Any:
    member._consumer = consumer  # type: ignore[assignment]
    return member._commit_handed("t", records)


def test_a_failed_commit_makes_the_next_assignment_start_past_what_was_handed_out() -> None:
    member = _Member(10)
    assert _handed(
        member, _Consumer({}, commit_fails=True), [Fetched(0, 7, b""), Fetched(1, 3, b"")]
    )
    consumer = _Consumer({0: 5, 1: 9})  # partition 1: another member went further meanwhile
    member._on_assign(
        consumer, [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)]
    )
    assert consumer.assigned is not None
    assert [(p.partition, p.offset) for p in consumer.assigned] == [(0, 8), (1, 9), (2, -1001)]
    assert [(p.partition, p.offset) for p in consumer.commits[0]] == [(0, 8), (1, 9)]
    # used once: a later assignment starts at the group's commit again
    again = _Consumer({0: 8})
    member._on_assign(again, [TopicPartition("t", 0)])
    assert again.assigned is None


def test_the_group_commit_unknown_the_handed_end_is_used() -> None:
    member = _Member(10)
    _handed(member, _Consumer({}, commit_fails=True), [Fetched(0, 7, b"")])
    consumer = _Consumer(None, commit_fails=True)  # Kafka still coming back
    member._on_assign(consumer, [TopicPartition("t", 0)])
    assert consumer.assigned is not None
    assert [(p.partition, p.offset) for p in consumer.assigned] == [(0, 8)]


def test_a_later_successful_commit_forgets_the_failed_one() -> None:
    member = _Member(10)
    _handed(member, _Consumer({}, commit_fails=True), [Fetched(0, 7, b"")])
    assert _handed(member, _Consumer({}), [Fetched(0, 9, b"")]) is None
    consumer = _Consumer({0: 10})
    member._on_assign(consumer, [TopicPartition("t", 0)])
    assert consumer.assigned is None


class _Stuck:
    """A member's consumer behind on partition 0 (records to offset 9, position 2): it
    delivers nothing, its fetches take no time."""

    def __init__(self) -> None:
        self.paused: list[Any] = []

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def poll(self, timeout: float) -> None:
        return None

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("t", 0)]

    def pause(self, parts: list[TopicPartition]) -> None:
        self.paused = parts

    def resume(self, parts: list[TopicPartition]) -> None:
        self.paused = []

    def offsets_for_times(self, parts: list[TopicPartition], timeout: float) -> list[Any]:
        return [TopicPartition(p.topic, p.partition, 9) for p in parts]

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, 2) for p in parts]


class _Watched(_Member):
    def __init__(self, buffer_max: int, judge: StallJudge, tally: StallTally) -> None:
        super().__init__(buffer_max, stall=judge, tally=tally)
        self.made: list[_Stuck] = []

    def _new_member(self) -> Any:
        self.made.append(_Stuck())
        return self.made[-1]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> tuple[_Watched, _Clock, list[Any]]:
    clock, retired = _Clock(), []
    monkeypatch.setattr(buffered_member, "time", clock)
    monkeypatch.setattr(kafka_consumer, "time", clock)
    monkeypatch.setattr(buffered_member, "retire_member", lambda c, closed: retired.append(c))
    judges: list[StallJudge] = []
    member = _Watched(2, StallJudge("m", 30.0), StallTally("mr-consumers", lambda: judges))
    assert member.stall is not None
    judges.append(member.stall)
    member._consumer = _Stuck()  # type: ignore[assignment]
    member.stall.assigned(clock.now)
    return member, clock, retired


def test_a_member_that_stalls_is_replaced_and_its_unhanded_buffer_dropped(
    watched: tuple[_Watched, _Clock, list[Any]],
) -> None:
    member, clock, retired = watched
    first = member._consumer
    member._buffer.append(Fetched(1, 4, b"read ahead, not handed out"))
    for _ in range(4):  # a check every 10 s: behind at the same position for 30 s
        clock.now += 10
        member._fill_blocking(1, 0.0)
    assert retired == [first]  # closed off this thread
    assert member._consumer is cast(Any, member.made[0])
    assert list(member._buffer) == []  # read again by the new member from the commit
    assert member._tally is not None
    assert (member._tally.renewals, member._tally.failures) == (1, 0)


def test_a_member_paused_with_a_full_buffer_is_never_judged_stalled(
    watched: tuple[_Watched, _Clock, list[Any]],
) -> None:
    member, clock, retired = watched
    member._buffer.extend([Fetched(0, 0, b""), Fetched(0, 1, b"")])  # full: 2
    for _ in range(10):
        clock.now += 10
        member._fill_blocking(1, 0.0)
    assert member._paused
    assert retired == []
    assert member.made == []


@pytest.mark.integration
def test_a_wedged_mr_consumer_is_replaced_and_its_records_come(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """An MR consumer id's member wedged (its partitions paused once it has them): it fetches
    nothing while records arrive. After stall_s a new member of the same group gets the
    partitions from the commit (the first one closed: it left the group) and every record is
    handed out once, committed after; without the check none would ever come."""
    topic = topic_factory("mr-stall", partitions=2)
    tally = StallTally("mr-consumers", list)
    member = GroupConsumer(stack.kafka_bootstrap, topic, group_factory(), "c1", buffer_max=100,
                           stall=StallJudge("mr", 4.0), tally=tally)  # fmt: skip
    member.open_blocking()

    async def run() -> list[Fetched]:
        got: list[Fetched] = []
        deadline = time.monotonic() + 30
        while not _assignment(member) and time.monotonic() < deadline:
            async with member.lock:
                await member.fetch(10, 0.2)
        first = member._consumer
        assert first is not None
        assert len(first.assignment()) == 2, "never assigned"
        first.pause(first.assignment())  # wedged: it fetches nothing from now on
        del first
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        for i in range(20):
            producer.produce(topic, key=f"k{i % 4}".encode(), value=f"v{i}".encode())
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 40  # stall_s + a check + the group's rebalance, loaded
        while len(got) < 20 and time.monotonic() < deadline:
            async with member.lock:
                batch = await member.fetch(10, 0.5)
                await member.ack(batch)
            got += batch
        return got

    try:
        got = asyncio.run(run())
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(20))
        assert tally.renewals >= 1  # read by a new member, not by the paused one
    finally:
        member.close_blocking()


def _assignment(member: GroupConsumer) -> list[TopicPartition]:
    consumer = member._consumer
    return consumer.assignment() if consumer is not None else []
