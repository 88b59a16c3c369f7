"""The operator feed's record handling (records as the consumer hands them), and its consumer
replaced when it receives nothing (a real Kafka: the session's)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from confluent_kafka import Consumer, Producer

from api.operator.feed import FleetFeed
from tests.conftest import Endpoints


@dataclass
class Rec:
    topic_: str
    key_: bytes | None
    value_: bytes
    offset_: int = 0
    ts: int = 1000

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self.topic_

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.offset_

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes:
        return self.value_

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)


def _feed() -> FleetFeed:
    return FleetFeed("unused:9092", "iot.command-status", "iot.command-replies")


def test_topics_and_tenants() -> None:
    feed = _feed()
    assert feed._kind("iot.telemetry") == ("telemetry", "default")
    assert feed._kind("iot.acme.presence") == ("presence", "acme")
    assert feed._kind("iot.command-status") == ("status", "default")
    assert feed._kind("iot.command-replies") == ("replies", "default")
    assert feed._kind("iot.acme.events") is None
    assert feed._kind("iot.registry") is None


def test_same_device_id_in_two_tenants_stays_apart() -> None:
    feed = _feed()
    feed._apply([
        Rec("iot.acme.presence", b"p1", orjson.dumps({"online": True, "at": 5000})),
        Rec("iot.presence", b"p1", orjson.dumps({"online": False, "at": 6000})),
        Rec("iot.acme.telemetry", b"p1", orjson.dumps({"ts": 7000, "seq": 0,
                                                       "metrics": {"t": 1}})),
    ])  # fmt: skip
    acme = feed.seen("acme", "p1")
    assert (acme["online"], acme["last_seen"], acme["presence_at"]) == (True, 7000, 5000)
    assert feed.seen("default", "p1")["online"] is False
    assert feed.seen("beta", "p1") == {"online": None, "last_seen": None, "presence_at": None}
    assert feed._next[("iot.acme.telemetry", 0)] == 1


def test_commands_carry_their_tenant_and_replies() -> None:
    feed = _feed()
    status = {"command_id": "c1", "state": "sent", "attempt": 1, "device_id": "p1", "at": 10,
              "command": {"name": "reboot", "args": {}, "tenant": "acme"}}  # fmt: skip
    feed._apply([
        Rec("iot.command-status", b"c1", orjson.dumps(status)),
        Rec("iot.command-replies", b"p1", orjson.dumps({"command_id": "c1", "status": "ok",
                                                         "result": {"x": 1}})),
        Rec("iot.command-status", b"c1", orjson.dumps(status | {"state": "succeeded", "at": 20})),
        Rec("iot.command-status", b"c2", orjson.dumps({"command_id": "c2", "state": "sent",
                                                        "device_id": "q", "at": 1,
                                                        "command": {"name": "n"}})),
    ])  # fmt: skip
    c1 = feed.command("c1")
    assert c1 is not None
    assert c1["tenant"] == "acme"
    assert [s["state"] for s in c1["states"]] == ["sent", "succeeded"]
    assert c1["replies"][0]["result"] == {"x": 1}
    c2 = feed.command("c2")
    assert c2 is not None
    assert c2["tenant"] == "default"  # no tenant in the command: the default tenant's
    assert feed.command("nope") is None
    assert {c["command_id"] for c in feed.commands()} == {"c1", "c2"}


def test_a_feed_whose_consumer_receives_nothing_is_replaced_and_reads_on(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    """As the console's tailer: the first consumer's partitions are paused through the feed's
    own hook (it fetches nothing, raises nothing); the stall judge replaces it and the new one,
    resuming where the first stood, hands over the commands' statuses sent meanwhile."""
    status, replies = topic_factory("status", partitions=2), topic_factory("replies", 1)
    feed = FleetFeed(stack.kafka_bootstrap, status, replies, stall_s=4.0)
    wedged = threading.Event()

    def wedge(consumer: Consumer) -> None:
        if not wedged.is_set():  # the first consumer only
            consumer.pause(consumer.assignment())
            wedged.set()

    feed.on_assign = wedge
    try:
        asyncio.run(feed.ensure_started(20.0))
        assert wedged.is_set(), "the feed never assigned its topics"
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        ids = [f"c{i}" for i in range(10)]
        for cid in ids:
            doc = {"command_id": cid, "state": "sent", "device_id": "d", "at": 1,
                   "command": {"name": "n", "tenant": "acme"}}  # fmt: skip
            producer.produce(status, key=cid.encode(), value=orjson.dumps(doc))
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 25  # stall_s + a check + a new consumer, loaded
        while time.monotonic() < deadline and not all(feed.command(c) for c in ids):
            time.sleep(0.2)
        assert [c for c in ids if feed.command(c) is None] == []
        assert feed.stall.renewals >= 1  # read by a new consumer, not by the paused one
    finally:
        feed.stop()
