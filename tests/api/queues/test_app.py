"""Queues with per-message ack on the real Kafka over real HTTP: receive, ack, timeouts,
redelivery counts, the dead-letter topic, and a kill -9 of `iot-api` in the middle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from stack.ports import free_port as _free_port
from tests.api.harness import Client, running_api
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def receive(api: Client, queue: str, query: str) -> list[dict[str, Any]]:
    reply = api.request("POST", f"/queues/{queue}/receive{query}")
    assert reply.status == 200, reply.body
    messages: list[dict[str, Any]] = reply.json()["messages"]
    return messages


def answer(api: Client, queue: str, kind: str, handles: list[str]) -> list[str]:
    body = json.dumps({"receiptHandles": handles})
    reply = api.request("POST", f"/queues/{queue}/{kind}", body, "application/json")
    assert reply.status == 200, reply.body
    results = reply.json()["results"]
    assert [r["receiptHandle"] for r in results] == handles
    return [r["status"] for r in results]


def collect(
    api: Client, queue: str, want: int, query: str, within: float = 60.0
) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + within
    while len(got) < want:
        assert time.monotonic() < deadline, f"{len(got)} of {want}: {got}"
        got += receive(api, queue, query)
    return got


def dead_letters(bootstrap: str, topic: str, want: int) -> list[tuple[bytes, dict[str, bytes]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    found: list[tuple[bytes, dict[str, bytes]]] = []
    deadline = time.monotonic() + 30
    try:
        while len(found) < want and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                if m.error() is None:
                    pairs: list[Any] = list(m.headers() or [])
                    headers = {k: v if isinstance(v, bytes) else b"" for k, v in pairs}
                    found.append((m.value() or b"", headers))
        found += [(m.value() or b"", {}) for m in consumer.consume(100, 1.0) if not m.error()]
    finally:
        consumer.close()
    return found


@pytest.fixture
def queue_api(stack: Endpoints) -> Iterator[Client]:
    """An instance with short clocks and its own markers topic (3 deliveries at most)."""
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap,
        insecure_anonymous=True,
        queue_markers_topic=f"markers.{uuid.uuid4().hex[:12]}",
        queue_max_deliveries=3,
        queue_clock_grace_ms=200,
    ) as svc:
        yield Client(svc.port)


def test_receive_ack_timeout_redelivery_and_dead_letter(
    queue_api: Client, stack: Endpoints
) -> None:
    api, queue = queue_api, f"q.{uuid.uuid4().hex[:12]}"
    made = api.request("PUT", f"/queues/{queue}?partitions=2")
    assert made.status == 200, made.body
    assert made.json()["deadLetterTopic"] == f"{queue}.dlq"
    assert made.json()["maxDeliveries"] == 3
    assert api.request("GET", f"/queues/{queue}").json() == made.json()
    sent = [f"m{i}" for i in range(10)]
    reply = api.request("POST", f"/queues/{queue}/messages", "\n".join(sent), "text/plain")
    assert reply.json()["count"] == 10

    first = collect(api, queue, 10, "?max=10&visibility=2&timeout=3000")
    assert sorted(m["message"] for m in first) == sorted(sent)  # a queue starts at its beginning
    assert {m["deliveryCount"] for m in first} == {1}
    by_text = {m["message"]: m["receiptHandle"] for m in first}
    assert answer(api, queue, "ack", [by_text[t] for t in sent[:4]]) == ["acked"] * 4
    assert answer(api, queue, "nack", [by_text["m4"]]) == ["nacked"]
    # the rest is invisible; m4, given back, is due at once, so it may be here already
    batch = receive(api, queue, "?max=10&visibility=2&timeout=0")
    assert [m["message"] for m in batch] in ([], ["m4"]), batch

    # m4 (given back) and m5-m9 (timed out) come again, counted; m0-m3 never
    second: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while True:
        for m in batch:  # m4 comes first (at once): acked as soon as it is here
            if m["message"] == "m4":
                assert answer(api, queue, "ack", [m["receiptHandle"], "bogus"]) == [
                    "acked", "invalid",
                ]  # fmt: skip
        second += batch
        if len(second) >= 6:
            break
        assert time.monotonic() < deadline, second
        batch = receive(api, queue, "?max=10&visibility=2&timeout=3000")
    assert sorted(m["message"] for m in second) == sent[4:]
    assert {m["deliveryCount"] for m in second} == {2}
    assert answer(api, queue, "ack", [by_text["m5"]]) == ["expired"]  # the old delivery's

    third = collect(api, queue, 5, "?max=10&visibility=2&timeout=3000")
    assert sorted(m["message"] for m in third) == sent[5:]
    assert {m["deliveryCount"] for m in third} == {3}
    # the third delivery times out too: the maximum, so to the dead-letter topic, not the queue
    dead = dead_letters(stack.kafka_bootstrap, f"{queue}.dlq", 5)
    assert sorted(value.decode() for value, _ in dead) == sent[5:]
    assert all(h["iot-delivery-count"] == b"3" for _, h in dead)
    assert all(h["iot-queue"] == queue.encode() for _, h in dead)
    assert receive(api, queue, "?max=10&visibility=2&timeout=3000") == []


def test_bad_requests(queue_api: Client) -> None:
    api, queue = queue_api, f"q.{uuid.uuid4().hex[:12]}"
    missing = api.request("POST", f"/queues/{queue}/receive?timeout=0")
    assert missing.status == 404
    assert missing.json()["mrstatus"] == 3001
    assert api.request("PUT", f"/queues/{queue}").status == 200
    for query in ("?max=0", "?max=x", "?visibility=0", "?visibility=-1", "?timeout=x"):
        assert api.request("POST", f"/queues/{queue}/receive{query}").status == 400, query
    bad = api.request("POST", f"/queues/{queue}/ack", '{"handles": 1}', "application/json")
    assert bad.status == 400
    assert bad.json()["mrstatus"] == 5005


def test_two_instances_share_a_queue(stack: Endpoints) -> None:
    """Receivers on two instances compete for one queue; acks go to either instance."""
    markers, queue = f"markers.{uuid.uuid4().hex[:12]}", f"q.{uuid.uuid4().hex[:12]}"
    settings = {
        "kafka_bootstrap": stack.kafka_bootstrap,
        "insecure_anonymous": True,
        "queue_markers_topic": markers,
    }
    with running_api(**settings) as one, running_api(**settings) as two:
        a, b = Client(one.port), Client(two.port)
        assert a.request("PUT", f"/queues/{queue}?partitions=4").status == 200
        for client in (a, b):  # both join the queue's group before anything is there
            assert receive(client, queue, "?timeout=2000") == []
        time.sleep(3)  # one rebalance to settle on two members (their keepers poll)
        sent = [f"s{i}" for i in range(40)]
        for i, text in enumerate(sent):  # keys spread them over the 4 partitions
            a.request("POST", f"/queues/{queue}/messages?partitionKey=k{i}", text, "text/plain")
        served: dict[str, list[str]] = {"a": [], "b": []}
        deadline = time.monotonic() + 60
        while len(set(served["a"] + served["b"])) < 40:
            assert time.monotonic() < deadline, served
            for name, client, other in (("a", a, b), ("b", b, a)):
                batch = receive(client, queue, "?max=5&visibility=60&timeout=500")
                served[name] += [m["message"] for m in batch]
                if batch:  # the ack through the other instance
                    handles = [m["receiptHandle"] for m in batch]
                    assert answer(other, queue, "ack", handles) == ["acked"] * len(batch)
        assert sorted(set(served["a"] + served["b"])) == sorted(sent)
        assert served["a"]
        assert served["b"]
        assert receive(a, queue, "?max=10&timeout=1000") == []


# --- a second instance after a kill -9 ------------------------------------------------------


class Instance:
    def __init__(self, bootstrap: str, markers: str) -> None:
        self.port = _free_port()
        env = {
            **os.environ,
            "IOT_KAFKA_BOOTSTRAP": bootstrap,
            "IOT_QUEUE_MARKERS_TOPIC": markers,
            "IOT_QUEUE_CLOCK_GRACE_MS": "200",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api", "--insecure-anonymous", "--api-port", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = Client(self.port)
        deadline = time.monotonic() + 90
        while True:
            try:
                if self.client.request("GET", "/healthz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            assert self.proc.poll() is None, "iot-api exited"
            assert time.monotonic() < deadline, "iot-api did not start"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def test_a_killed_instance_loses_nothing(stack: Endpoints) -> None:
    markers, queue = f"markers.{uuid.uuid4().hex[:12]}", f"q.{uuid.uuid4().hex[:12]}"
    sent = [f"k{i}" for i in range(30)]
    first = Instance(stack.kafka_bootstrap, markers)
    second: Instance | None = None
    try:
        a = first.client
        assert a.request("PUT", f"/queues/{queue}?partitions=3").status == 200
        assert a.request("POST", f"/queues/{queue}/messages", "\n".join(sent), "text/plain").json()[
            "count"
        ] == 30  # fmt: skip
        taken = collect(a, queue, 12, "?max=4&visibility=25&timeout=3000")
        handles = {m["message"]: m["receiptHandle"] for m in taken}
        held = sorted(handles)
        assert answer(a, queue, "ack", [handles[t] for t in held[:6]]) == ["acked"] * 6
        first.proc.kill()  # kill -9: no goodbye to Kafka's groups
        first.proc.wait(10)

        second = Instance(stack.kafka_bootstrap, markers)
        b = second.client
        # handles of the dead instance's deliveries are still good, on any instance
        assert answer(b, queue, "ack", [handles[t] for t in held[6:9]]) == ["acked"] * 3
        acked = set(held[:9])
        counts: dict[str, list[int]] = {}
        deadline = time.monotonic() + 150
        while acked | set(counts) != set(sent):
            assert time.monotonic() < deadline, f"missing {set(sent) - acked - set(counts)}"
            for m in receive(b, queue, "?max=10&visibility=60&timeout=2000"):
                counts.setdefault(m["message"], []).append(m["deliveryCount"])
                assert answer(b, queue, "ack", [m["receiptHandle"]]) == ["acked"]
        assert not acked & set(counts)  # acked before or after the kill: never again
        assert {t: counts[t] for t in held[9:]} == {t: [2] for t in held[9:]}  # timed out
        assert {t: c for t, c in counts.items() if t not in held} == {
            t: [1] for t in sent if t not in held
        }  # never handed out before the kill: once each, for the first time
        assert receive(b, queue, "?max=10&visibility=60&timeout=3000") == []
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_queues_own_settings_are_kept_in_kafka_across_a_restart(stack: Endpoints) -> None:
    """Visibility timeout and maximum deliveries set at creation (the service's defaults are
    30 s and 5) are applied by a restarted instance and changed by the settings endpoint."""
    settings = {
        "kafka_bootstrap": stack.kafka_bootstrap, "insecure_anonymous": True,
        "queue_markers_topic": f"markers.{uuid.uuid4().hex[:12]}",
        "queue_settings_topic": f"qsettings.{uuid.uuid4().hex[:12]}",
        "queue_clock_grace_ms": 200,
    }  # fmt: skip
    queue = f"q.{uuid.uuid4().hex[:12]}"
    with running_api(**settings) as svc:
        api = Client(svc.port)
        assert api.request("PUT", f"/queues/{queue}?maxDeliveries=0").status == 400
        made = api.request("PUT", f"/queues/{queue}?visibility=1.5&maxDeliveries=1")
        assert made.status == 200, made.body
        assert (made.json()["visibilityTimeoutS"], made.json()["maxDeliveries"]) == (1.5, 1)
    with running_api(**settings) as svc:  # a new instance reads them back from Kafka
        api = Client(svc.port)
        info = api.request("GET", f"/queues/{queue}").json()
        assert (info["visibilityTimeoutS"], info["maxDeliveries"]) == (1.5, 1)
        assert api.request("POST", f"/queues/{queue}/messages", "a", "text/plain").status == 200
        asked_ms = time.time() * 1000
        (got,) = collect(api, queue, 1, "?timeout=3000")  # no `visibility`: the queue's 1.5 s
        assert got["deliveryCount"] == 1
        assert asked_ms + 1500 <= got["visibleAgainMs"] <= time.time() * 1000 + 1500
        # not acked: one delivery is its maximum, so it goes to the dead letters, not back
        dead = dead_letters(stack.kafka_bootstrap, f"{queue}.dlq", 1)
        assert [(v, h["iot-delivery-count"]) for v, h in dead] == [(b"a", b"1")]
        assert receive(api, queue, "?timeout=2000") == []
        changed = api.request(
            "PUT", f"/queues/{queue}/settings", '{"maxDeliveries": 2}', "application/json"
        )
        assert changed.status == 200, changed.body
        assert (changed.json()["visibilityTimeoutS"], changed.json()["maxDeliveries"]) == (1.5, 2)
        bad = api.request("PUT", f"/queues/{queue}/settings", '{"visibilityTimeoutS": -1}',
                          "application/json")  # fmt: skip
        assert bad.status == 400
        assert (
            api.request("PUT", "/queues/q.none-such/settings", "{}", "application/json").status
            == 404
        )
    with running_api(**settings) as svc:
        info = Client(svc.port).request("GET", f"/queues/{queue}").json()
        assert info["maxDeliveries"] == 2
