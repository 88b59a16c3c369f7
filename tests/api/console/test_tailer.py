from __future__ import annotations

import threading
import time
from collections.abc import Callable

import orjson
from confluent_kafka import Consumer, Producer

from api.console.fleet import FleetState
from api.console.runtime import TOPICS
from api.console.tailer import Tailer, tenant_copies
from tests.conftest import Endpoints


def test_tenant_copies_of_the_watched_topics() -> None:
    names = [
        "iot.telemetry", "iot.acme.telemetry", "iot.acme.presence", "iot.beta.events",
        "iot.acme.dlq",
        "iot.acme.command-status", "iot.Bad.telemetry", "iot.a.b.telemetry", "other.acme.telemetry",
    ]  # fmt: skip
    assert tenant_copies(TOPICS, names) == {
        "iot.acme.telemetry": ("telemetry", "acme"),
        "iot.acme.presence": ("presence", "acme"),
        "iot.beta.events": ("events", "beta"),
        "iot.acme.dlq": ("dlq", "acme"),
    }
    assert tenant_copies({"telemetry": "flat"}, ["flat", "flat.acme"]) == {}


def test_a_tailer_whose_consumer_receives_nothing_is_replaced_and_reads_on(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    """A wedged consumer raises nothing: here the first one's partitions are paused (through
    the tailer's own hook), so it fetches nothing while records arrive. The stall judge finds
    it within stall_s (+ a check) and a new consumer, resuming where the first stood, hands
    the records over; without the judge none would ever come (the paused one polls on)."""
    topic = topic_factory("stall", partitions=2)
    tailer = Tailer(stack.kafka_bootstrap, {"telemetry": topic}, FleetState(), stall_s=4.0)
    wedged = threading.Event()

    def wedge(consumer: Consumer) -> None:
        if not wedged.is_set():  # the first consumer only
            consumer.pause(consumer.assignment())
            wedged.set()

    tailer.on_assign = wedge
    tailer.start()
    try:
        assert wedged.wait(20), "the tailer never assigned its topic"
        _produce(stack.kafka_bootstrap, topic, 20)
        deadline = time.monotonic() + 25  # stall_s + a check + a new consumer, loaded
        while time.monotonic() < deadline and _delivered(tailer, topic) < 20:
            time.sleep(0.2)
        assert _delivered(tailer, topic) == 20
        assert tailer.stall.renewals >= 1  # it was replaced, not read by the paused one
    finally:
        tailer.stop()


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        doc = {"ts": int(time.time() * 1000), "seq": i, "metrics": {"t": i}}
        producer.produce(topic, key=f"d{i % 3}".encode(), value=orjson.dumps(doc))
    assert producer.flush(10) == 0


def _delivered(tailer: Tailer, topic: str) -> int:
    """Records handed to the tailer's state (its resume offsets: past the last one applied)."""
    with tailer.lock:
        return sum(n for (t, _), n in tailer._next.items() if t == topic)
