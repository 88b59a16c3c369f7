"""What the stall judge is told of a live consumer (kafka_watch/consumer.py), with a fake one."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from confluent_kafka import OFFSET_END, TopicPartition

from kafka_watch.consumer import consumer_stall, consumer_stalled
from kafka_watch.stall import StallJudge


class _Consumer:
    """The calls of a confluent-kafka Consumer that consumer_stall makes, answered from dicts."""

    def __init__(
        self,
        high: dict[int, int],
        position: dict[int, int],
        committed: dict[int, int] | None = None,
        low: int = 0,
    ):
        self.high, self.pos, self.commits, self.low = high, position, committed or {}, low
        self.asked: list[tuple[list[int], float]] = []
        self.asked_committed: list[list[int]] = []

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("t", p) for p in sorted(self.high)]

    def offsets_for_times(self, parts: list[TopicPartition], timeout: float) -> list[Any]:
        self.asked.append(([p.offset for p in parts], timeout))  # latest: OFFSET_END
        return [TopicPartition(p.topic, p.partition, self.high[p.partition]) for p in parts]

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, self.pos[p.partition]) for p in parts]

    def committed(self, parts: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.asked_committed.append([p.partition for p in parts])
        return [TopicPartition(p.topic, p.partition, self.commits.get(p.partition, -1001))
                for p in parts]  # fmt: skip

    def get_watermark_offsets(
        self, part: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        return self.low, self.high[part.partition]


def test_consumer_stall_asks_the_latest_offsets_and_takes_the_later_position() -> None:
    # 0: librdkafka's position unknown (nothing handed yet), the owner's resume offset is 4;
    # 1: librdkafka's position ahead of the owner's; 2: librdkafka's past a commit marker
    consumer = _Consumer({0: 9, 1: 9, 2: 9}, {0: -1001, 1: 7, 2: 9})
    judge = StallJudge("console-tailer", 10.0)
    handed = {("t", 0): 4, ("t", 1): 3, ("t", 2): 2}
    stall = cast(Any, consumer_stall)  # the fake stands in for a Consumer
    assert stall(consumer, judge, handed, 5.0, 0.0) == []
    assert consumer.asked == [([OFFSET_END] * 3, 5.0)]
    assert stall(consumer, judge, handed, 5.0, 10.0) == [("t", 0), ("t", 1)]
    consumer.pos[1] = 8  # partition 1 moved on
    assert stall(consumer, judge, handed, 5.0, 11.0) == [("t", 0)]
    assert judge.failures == 1
    assert consumer.asked_committed == []  # not a group member's start: nothing more asked
    consumer.high = {}  # nothing assigned: nothing asked
    assert stall(consumer, judge, handed, 5.0, 12.0) == []
    assert len(consumer.asked) == 3


def test_a_group_member_that_handed_nothing_starts_at_its_commit_or_the_low_end() -> None:
    """Wedged from its assignment: librdkafka knows no position and the owner handed nothing.
    Partition 0 starts at the group's commit (3), partition 1 (no commit) at the low end (2),
    partition 2 (no commit, empty) is idle, partition 3 is at its commit = its end."""
    consumer = _Consumer({0: 9, 1: 9, 2: 0, 3: 5}, dict.fromkeys(range(4), -1001),
                         committed={0: 3, 3: 5}, low=2)  # fmt: skip
    judge = StallJudge("commands", 10.0)
    stall = cast(Any, consumer_stall)
    assert stall(consumer, judge, {}, 5.0, 0.0, group_start="earliest") == []
    assert consumer.asked_committed == [[0, 1, 2, 3]]
    assert stall(consumer, judge, {}, 5.0, 10.0, group_start="earliest") == [("t", 0), ("t", 1)]
    consumer.pos[0] = 4  # it read one: its own position now
    assert stall(consumer, judge, {}, 5.0, 11.0, group_start="earliest") == [("t", 1)]
    assert consumer.asked_committed[-1] == [1, 2, 3]
    assert stall(consumer, judge, {}, 5.0, 11.0) == []  # without group_start: 1 is unknown
    judge.reset()
    consumer.pos[0] = 9  # caught up on 0: only 1 (no commit) is left to judge
    assert stall(consumer, judge, {}, 5.0, 20.0, group_start="latest") == []
    assert stall(consumer, judge, {}, 5.0, 30.0, group_start="latest") == []  # 1: from its end


def test_consumer_stalled_counts_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Consumer({0: 9}, {0: 1})
    judge = StallJudge("registry", 0.001)
    stalled = cast(Any, consumer_stalled)
    assert not stalled(consumer, judge, {}, "registry follower: its")
    with caplog.at_level(logging.WARNING, logger="kafka_watch.consumer"):
        while not stalled(consumer, judge, {}, "registry follower: its"):
            pass  # the monotonic clock passes stall_s
    assert judge.renewals == 1
    assert "registry follower: its Kafka consumer receives nothing" in caplog.text
    assert "(t:0)" in caplog.text
