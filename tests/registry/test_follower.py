"""The registry follower's end client (registry/follower.py): a failed end query makes it anew,
so the next query reads the partition's leader afresh instead of waiting on a dead one (a
3-node cluster whose leader of `iot.registry` died: bench/results/chaos.md, "3-node Kafka")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from registry import follower as follower_module
from registry.follower import RegistryFollower
from registry.kafka_store import StoreError
from tests.conftest import Endpoints


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


class Clock:
    """A monotonic clock that moves a second each time it is read."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_a_fetching_consumer_that_delivers_nothing_while_behind_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records up to offset 5, the follower at 2, its consumer delivering nothing: every strict
    catch_up times out; once its position sat still for stall_s it is replaced by a new one at
    the same position, the old one retired (freed off the caller's thread)."""
    FakeConsumer.made = []
    retired: list[Any] = []
    monkeypatch.setattr(follower_module, "Consumer", FakeConsumer)
    monkeypatch.setattr(follower_module, "time", Clock())
    monkeypatch.setattr(follower_module, "retire", retired.append)
    f = RegistryFollower("127.0.0.1:1", "iot.registry", timeout=3.0, stall_s=30.0)
    f.start({0: 2})
    fetching = FakeConsumer.made[0]
    for _ in range(5):  # a few seconds each: not yet stall_s
        with pytest.raises(StoreError, match="did not deliver up to its end"):
            f.catch_up()
    assert f.stall.renewals == 0
    while f.stall.renewals == 0:
        with pytest.raises(StoreError, match="did not deliver up to its end"):
            f.catch_up()
    assert retired == [fetching]
    fresh = FakeConsumer.made[-1]
    assert len(FakeConsumer.made) == 3  # fetching, end client, the new fetching one
    assert [(tp.partition, tp.offset) for tp in fresh.assigned] == [(0, 2)]
    assert fresh.config["isolation.level"] == "read_committed"
    assert f.position == {0: 2}  # nothing skipped


def test_an_idle_follower_at_the_end_is_never_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeConsumer.made = []
    monkeypatch.setattr(follower_module, "Consumer", FakeConsumer)
    monkeypatch.setattr(follower_module, "time", Clock())
    f = RegistryFollower("127.0.0.1:1", "iot.registry", stall_s=2.0)
    f.start({0: FakeConsumer.ends})
    for _ in range(10):
        assert f.catch_up() == []
    assert f.stall.renewals == 0
    assert len(FakeConsumer.made) == 2


@pytest.mark.integration
def test_a_wedged_follower_is_replaced_and_catches_up(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    """A real consumer wedged by pausing its partition (through the follower's own hook): it
    delivers nothing while records arrive, so catch_up times out; after stall_s a new consumer
    at the same position delivers every record once. Without the check it never would."""
    topic = topic_factory("reg-stall", partitions=1)
    f = RegistryFollower(stack.kafka_bootstrap, topic, timeout=1.0, stall_s=4.0)
    wedged: list[Any] = []

    def wedge(consumer: Any) -> None:
        if not wedged:  # the first consumer only
            consumer.pause(consumer.assignment())
            wedged.append(consumer)

    f.on_consumer = wedge
    f.start({0: 0})
    try:
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        for i in range(5):
            producer.produce(topic, key=f"k{i}".encode(), value=b"v")
        assert producer.flush(10) == 0
        got: list[Any] = []
        deadline = time.monotonic() + 40  # stall_s + timeouts + a new consumer, loaded
        while len(got) < 5 and time.monotonic() < deadline:
            try:
                got += f.catch_up()
            except StoreError:
                time.sleep(0.2)
        assert [k for k, _ in got] == [f"k{i}".encode() for i in range(5)]  # once each
        assert f.stall.renewals >= 1
        assert f.position == {0: 5}
    finally:
        f.close()
