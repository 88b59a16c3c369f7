"""The northbound links' Kafka reader (amqp/north_kafka.py): a member wedged (its partitions
paused, so it fetches nothing while records arrive) is replaced by a new member of its group."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import orjson
import pytest
from confluent_kafka import Consumer, Producer

from amqp.north_kafka import ReplyFollower, StreamFeed
from amqp.north_model import Record
from commands.client import Tail
from tests.conftest import Endpoints


@pytest.mark.integration
def test_a_wedged_northbound_reader_is_replaced_and_its_records_come(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """Credit for everything granted up front (the reader never pauses on its own); its first
    member's partitions paused once assigned, in the reader's own thread (the feed's hook: a
    member's methods called from another thread wait while the reader consumes). After
    stall_s a new member of the link's group starts at the group's commit and every record
    produced meanwhile reaches the link; without the check none would ever come (the paused
    member polls on)."""
    topic = topic_factory("north-stall", partitions=2)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    wedged = threading.Event()

    def wedge(consumer: Consumer) -> None:
        if not wedged.is_set() and len(consumer.assignment()) == 2:
            consumer.pause(consumer.assignment())  # it fetches nothing from now on
            wedged.set()

    async def run() -> tuple[list[Record], int]:
        got: list[Record] = []
        ready = asyncio.Event()
        renewed: list[int] = []
        feed = StreamFeed(stack.kafka_bootstrap, topic, group_factory(), on_records=got.extend,
                          on_ready=ready.set, stall_s=3.0,
                          on_renewed=lambda: renewed.append(1))  # fmt: skip
        feed.on_assigned = wedge
        feed.grant(1000)
        feed.start()
        try:
            await asyncio.wait_for(ready.wait(), 30)
            assert wedged.is_set(), "never assigned both partitions"
            for i in range(20):
                producer.produce(topic, key=f"k{i % 4}".encode(), value=f"v{i}".encode())
            assert await asyncio.to_thread(producer.flush, 10) == 0
            # stall_s + a check + the new member's join, loaded
            await _until(lambda: len({(r.partition, r.offset) for r in got}) == 20, 30)
        finally:
            feed.close()
            await asyncio.to_thread(feed._thread.join, 15)
        return got, len(renewed)

    got, renewals = asyncio.run(run())
    assert sorted({r.value for r in got}) == sorted(f"v{i}".encode() for i in range(20))
    assert renewals >= 1  # read by a new member, not by the paused one


@pytest.mark.integration
def test_a_wedged_replies_follower_is_replaced_at_its_positions(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    """The replies follower's first consumer (assigned, no group) paused before it reads: it
    fetches nothing while replies arrive. After stall_s a new consumer assigned where the old
    one stood hands over every reply once; without the check none would ever come."""
    topic = topic_factory("replies-stall", partitions=2)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    tails: list[Tail] = []

    def wedge(tail: Tail) -> None:
        if not tails:
            tail.consumer.pause(tail.consumer.assignment())  # it fetches nothing from now on
        tails.append(tail)

    async def run() -> tuple[list[dict[str, object]], int]:
        got: list[dict[str, object]] = []
        renewed: list[int] = []
        follower = ReplyFollower(stack.kafka_bootstrap, topic, got.append, stall_s=3.0,
                                 on_renewed=lambda: renewed.append(1))  # fmt: skip
        follower.on_tail = wedge
        await asyncio.to_thread(follower.start)
        try:
            for i in range(20):
                producer.produce(topic, value=orjson.dumps({"n": i}), partition=i % 2)
            assert await asyncio.to_thread(producer.flush, 10) == 0
            await _until(lambda: len(got) >= 20, 30)  # stall_s + a check, loaded
        finally:
            follower.close()
        return got, len(renewed)

    got, renewals = asyncio.run(run())
    assert sorted(int(str(d["n"])) for d in got) == list(range(20))  # each once
    assert renewals >= 1
    assert len(tails) >= 2


async def _until(done: Callable[[], bool], timeout_s: float) -> None:
    """Wait (bounded) until ``done()``; the caller asserts what it needs."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.1) + 1):
        if done() or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.1)
