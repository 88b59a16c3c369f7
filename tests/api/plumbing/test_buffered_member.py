"""BufferedMember's re-assignment after a failed commit (api/plumbing/buffered_member.py),
without a broker: the consumer is a stand-in that records what it was told (the Kafka restart
that makes the commit fail is tests/stack/test_faults_integration.py's)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from api.mr.consumers import Fetched
from api.plumbing.buffered_member import BufferedMember


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
