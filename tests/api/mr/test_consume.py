"""GET /events/{topic}/{group}/{id} on the real Kafka: MR's consumer groups and long poll."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.api.harness import Client, running_api
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def drain(api: Client, topic: str, group: str, cid: str, want: int, limit: int = 0) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + 60
    query = f"?timeout=2000&limit={limit}" if limit else "?timeout=2000"
    while len(got) < want and time.monotonic() < deadline:
        reply = api.consume(topic, group, cid, query)
        assert reply.status == 200, reply.body
        got.extend(reply.json())
    return got


def subscribe(api: Client, topic: str, group: str, cid: str) -> None:
    """A group's first request: it starts at the log end from here."""
    reply = api.consume(topic, group, cid, "?timeout=0")
    assert reply.status == 200, reply.body


def test_new_group_starts_at_the_log_end_and_messages_come_back_as_strings(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=3), group_factory()
    api.publish(topic, '[{"old": 1}, {"old": 2}]')
    first = api.consume(topic, group, "c1", "?timeout=1000")
    assert first.status == 200
    assert first.json() == []  # a new group does not see what came before it
    assert first.headers["Cache-Control"] == "no-store, no-cache, must-revalidate"
    api.publish(topic, '{"topicName": "TestTopic1"}')  # the CSIT sequence
    got = drain(api, topic, group, "c1", 1)
    assert got == ['{"topicName":"TestTopic1"}']


def test_two_groups_each_get_everything(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, g1, g2 = topic_factory("api", partitions=4), group_factory(), group_factory()
    for group in (g1, g2):
        subscribe(api, topic, group, "c")
    lines = [f"m{i}" for i in range(30)]
    api.publish(topic, "\n".join(lines), "text/plain")
    for group in (g1, g2):
        assert sorted(drain(api, topic, group, "c", 30)) == sorted(lines)


def test_competing_ids_split_a_group_without_loss(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=4), group_factory()
    for cid in ("a", "b"):
        subscribe(api, topic, group, cid)
    time.sleep(3)  # let the group settle on two members (the keeper polls them)
    messages = [json.dumps({"i": i}, separators=(",", ":")) for i in range(60)]
    for i, message in enumerate(messages):  # keys spread them over the partitions
        api.publish(topic, message, "text/plain", query=f"?partitionKey=k{i}")
    by_id: dict[str, list[str]] = {"a": [], "b": []}
    deadline = time.monotonic() + 60
    while sum(map(len, by_id.values())) < 60 and time.monotonic() < deadline:
        for cid, got in by_id.items():
            got.extend(api.consume(topic, group, cid, "?timeout=500").json())
    assert sorted(by_id["a"] + by_id["b"]) == sorted(messages)
    assert by_id["a"]
    assert by_id["b"]
    assert not set(by_id["a"]) & set(by_id["b"])


def test_limit_across_calls_loses_nothing(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=1), group_factory()
    subscribe(api, topic, group, "c")
    lines = [f"n{i}" for i in range(25)]
    api.publish(topic, "\n".join(lines), "text/plain")
    got: list[str] = []
    calls = 0
    while len(set(got)) < 25:
        calls += 1
        assert calls <= 10, got
        batch = api.consume(topic, group, "c", "?timeout=5000&limit=10").json()
        assert 1 <= len(batch) <= 10
        got.extend(batch)
    # a single consumer: every record once, in order (a committed batch never comes again)
    assert got == lines
    assert api.consume(topic, group, "c", "?timeout=500").json() == []


def test_single_consumers_at_once_each_get_every_record_once(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """8 groups of one id each, read with ``limit`` at the same time: no batch twice (before the
    commit was shielded from the handler's cancellation, a batch came again in the first round
    of 8 in each of 3 runs: a client closing right after the answer let the next request in
    before the committed records left the buffer)."""
    results: dict[str, list[str]] = {}
    lines = [f"p{i}" for i in range(25)]

    def one(topic: str, group: str) -> None:
        api.publish(topic, "\n".join(lines), "text/plain")
        got: list[str] = []
        for _ in range(12):
            if len(set(got)) >= len(lines):
                break
            got.extend(api.consume(topic, group, "c", "?timeout=5000&limit=10").json())
        got.extend(api.consume(topic, group, "c", "?timeout=300").json())
        results[group] = got

    pairs = [(topic_factory("api", partitions=1), group_factory()) for _ in range(8)]
    for topic, group in pairs:  # subscribed first (a new topic may take a moment to be listed)
        deadline = time.monotonic() + 30
        while api.consume(topic, group, "c", "?timeout=0").status != 200:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    readers = [threading.Thread(target=one, args=pair) for pair in pairs]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(120)
    assert len(results) == 8
    assert {g: got for g, got in results.items() if got != lines} == {}


def test_over_fetched_records_survive_the_consumer_closing(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """Only what was returned is committed: a closed consumer's read-ahead is read again."""
    topic, group = topic_factory("api", partitions=1), group_factory()
    lines = [f"r{i}" for i in range(20)]
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True, consumer_idle_s=1.0
    ) as svc:
        api = Client(svc.port)
        subscribe(api, topic, group, "c")
        api.publish(topic, "\n".join(lines), "text/plain")
        first = api.consume(topic, group, "c", "?timeout=5000&limit=5").json()
        assert first == lines[: len(first)]
        deadline = time.monotonic() + 30
        while len(svc.pool) and time.monotonic() < deadline:
            time.sleep(0.2)  # idle: closed with the rest of its fetch unreturned
        assert len(svc.pool) == 0
        rest = drain(api, topic, group, "c", 20 - len(first))
    # the returned batch was committed: the rest, once, in order
    assert first + rest == lines
    # a second service on the same group: nothing left, nothing repeated
    with running_api(kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True) as svc:
        assert Client(svc.port).consume(topic, group, "c", "?timeout=1500").json() == []


def test_long_poll_waits_for_timeout_and_returns_early_on_data(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=1), group_factory()
    subscribe(api, topic, group, "c")
    started = time.monotonic()
    assert api.consume(topic, group, "c", "?timeout=2500").json() == []
    waited = time.monotonic() - started
    assert 2.4 <= waited < 6.0

    answer: list[object] = []

    def poll() -> None:
        answer.append(api.consume(topic, group, "c", "?timeout=20000").json())

    poller = threading.Thread(target=poll)
    started = time.monotonic()
    poller.start()
    time.sleep(1.0)
    api.publish(topic, "wake", "text/plain")
    poller.join(30)
    took = time.monotonic() - started
    assert answer == [["wake"]]
    assert took < 8.0  # far below the 20 s timeout


def test_unknown_topic_and_incomplete_urls_are_404(api: Client) -> None:
    reply = api.consume("api.never-created-topic", "g", "c", "?timeout=0")
    assert reply.status == 404
    assert reply.json() == {
        "mrstatus": 3001,
        "helpURL": "http://onap.readthedocs.io",
        "message": "No such topic exists.-[api.never-created-topic]",
        "status": 404,
    }
    for path in ("/events/t1", "/events/t1/g1"):
        reply = api.request("GET", path)
        assert reply.status == 404
        assert reply.json()["mrstatus"] == 5008
        assert reply.json()["message"].startswith("Incorrect url - Expects consumer")
    assert api.request("GET", "/no/such/path").json()["mrstatus"] == 3001
    assert api.request("PUT", "/events/t1").json()["mrstatus"] == 3003


def test_negative_limit_is_400(api: Client, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory("api", partitions=1)
    assert api.consume(topic, "g", "c", "?limit=-1").status == 400


def test_a_client_leaving_a_long_poll_commits_nothing(
    api: Client, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=1), group_factory()
    subscribe(api, topic, group, "c")
    with socket.create_connection(("127.0.0.1", api.port)) as gone:
        gone.sendall(
            f"GET /events/{topic}/{group}/c?timeout=4000 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        )
        time.sleep(0.5)
    api.publish(topic, "kept", "text/plain")  # arrives after the client left
    assert drain(api, topic, group, "c", 1) == ["kept"]
