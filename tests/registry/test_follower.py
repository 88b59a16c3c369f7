"""The registry follower's end client (registry/follower.py): a failed end query makes it anew,
so the next query reads the partition's leader afresh instead of waiting on a dead one (a
3-node cluster whose leader of `iot.registry` died: bench/results/chaos.md, "3-node Kafka")."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from registry import follower as follower_module
from registry.follower import RegistryFollower
from registry.kafka_store import StoreError


class FakeConsumer:
    """A consumer whose end query fails while ``dead`` (the leader it knows is gone); each
    instance made is kept in ``made``."""

    made: ClassVar[list[FakeConsumer]] = []
    ends: ClassVar[int] = 5

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.dead = False
        self.closed = threading.Event()
        FakeConsumer.made.append(self)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        if self.dead:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get watermark"))
        return 0, FakeConsumer.ends

    def poll(self, timeout: float) -> None:
        return None

    def close(self) -> None:
        self.closed.set()


@pytest.fixture
def follower(monkeypatch: pytest.MonkeyPatch) -> RegistryFollower:
    FakeConsumer.made = []
    monkeypatch.setattr(follower_module, "Consumer", FakeConsumer)
    f = RegistryFollower("127.0.0.1:1,127.0.0.1:3", "iot.registry")
    f.start({0: FakeConsumer.ends})
    return f


def test_a_failed_end_query_makes_a_new_end_client_and_closes_the_old(
    follower: RegistryFollower,
) -> None:
    fetching, probe = FakeConsumer.made
    assert follower.catch_up() == []
    probe.dead = True
    with pytest.raises(StoreError, match=r"did not say where iot\.registry ends"):
        follower.catch_up()
    assert len(FakeConsumer.made) == 3
    fresh = FakeConsumer.made[-1]
    assert fresh.config["isolation.level"] == "read_committed"
    assert fresh.config["group.id"] != probe.config["group.id"]
    assert probe.closed.wait(10), "the old end client was never closed"
    assert not fetching.closed.is_set()  # the fetching consumer and its position are kept
    follower._failed_at = -1e9  # past the quiet time after a failure
    assert follower.catch_up() == []  # the new client answers
    assert len(FakeConsumer.made) == 3


def test_an_answered_query_keeps_its_client(follower: RegistryFollower) -> None:
    for _ in range(3):
        assert follower.catch_up() == []
    assert len(FakeConsumer.made) == 2
