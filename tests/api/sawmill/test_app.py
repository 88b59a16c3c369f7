"""sawmill's endpoints on the real Kafka over real HTTP: its test sequence, bugs fixed, SSE."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from tests.api.harness import Client, running_api
from tests.conftest import Endpoints
from tests.registry.conftest import store_factory  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def push(api: Client, topic: str, value: Any, headers: dict[str, str] | None = None) -> None:
    reply = api.request(
        "POST", f"/push/{topic}", json.dumps(value), "application/json", headers=headers
    )
    assert reply.status == 200, reply.body
    assert reply.json() == {"message": "added message to producer", "status": "Pass"}


def test_the_sawmill_sequence_reads_every_partition(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    reply = api.request("GET", "/connection/")
    assert reply.status == 200
    assert reply.json()["status"] == "success"
    assert reply.json()["message"].startswith("listening on ")
    spec = api.request("GET", "/spec").json()  # sawmill's 500 fixed: our OpenAPI document
    assert spec["openapi"].startswith("3.")
    assert {"/push/{topic}", "/realtime/{topic}", "/queues/{queue}/receive"} <= set(spec["paths"])

    topic = topic_factory("saw", partitions=3)
    listed = time.monotonic() + 10  # a new topic takes a moment to reach the metadata
    while topic not in api.request("GET", "/topics/").json():
        assert time.monotonic() < listed
        time.sleep(0.2)
    sent = [{"id": i, "sender": "sender@example.com"} for i in range(12)]
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    for i, message in enumerate(sent):
        if i < 3:
            push(api, topic, message)
        else:  # the rest on each partition in turn (sawmill read partition 0 only)
            producer.produce(topic, json.dumps(message).encode(), partition=i % 3)
            producer.flush(10)
        time.sleep(0.005)  # distinct record times: "latest" is by time
    got = api.request("GET", f"/consume/{topic}")
    assert got.status == 200
    assert got.json() == sent  # every partition, in record-time order
    positions = dict(pair.split(":") for pair in got.headers["X-Next-Offset"].split(","))
    assert sorted(positions) == ["0", "1", "2"]
    assert sum(int(o) for o in positions.values()) == 12
    assert all(int(o) >= 3 for o in positions.values())

    later = api.request("GET", f"/consume/{topic}?offset=1").json()  # offset 1 of each partition
    assert len(later) == 12 - 3
    assert all(m in sent for m in later)
    page = api.request("GET", f"/consume/{topic}?limit=5")
    assert page.json() == sent[:5]
    rest = api.request("GET", f"/consume/{topic}?offset={page.headers['X-Next-Offset']}").json()
    assert rest == sent[5:]

    assert api.request("GET", f"/latest/{topic}?offset=5").json() == sent[-5:]
    assert api.request("GET", f"/latest/{topic}").json() == sent[-10:]  # sawmill's default 10
    assert api.request("GET", f"/latest_time/{topic}").json() == sent  # the last hour
    time.sleep(2.2)
    newer: list[dict[str, Any]] = [{"id": 100 + i} for i in range(3)]
    for message in newer:
        push(api, topic, message)
    since = api.request("GET", f"/latest_time/{topic}?offset=2")
    assert since.status == 200  # sawmill: always 500
    assert since.json() == newer

    api.publish(topic, "not json", "text/plain")  # sawmill's decoder crashed on this
    assert api.request("GET", f"/latest/{topic}?offset=1").json() == ["not json"]

    gone = api.request("GET", f"/delete/{topic}")
    assert gone.json() == {"status": "pass", "message": f"topic {topic} deleted"}
    deadline = time.monotonic() + 30
    while topic in api.request("GET", "/topics/").json():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    again = api.request("GET", f"/delete/{topic}")
    assert again.status == 400
    assert again.json() == {"status": "error", "message": f"topic {topic} not found"}
    missing = api.request("GET", f"/consume/{topic}")
    assert missing.status == 404
    assert missing.json()["status"] == "error"


def test_bad_input_in_sawmills_shape(api: Client, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory("saw", partitions=1)
    reply = api.request("POST", f"/push/{topic}", "{not json", "application/json")
    assert reply.status == 400
    assert reply.json()["status"] == "error"
    assert api.request("GET", f"/consume/{topic}?offset=x").status == 400
    assert api.request("GET", f"/latest/{topic}?offset=-1").status == 400
    assert api.request("GET", "/consume/bad%20name").status == 400


# --- Server-Sent Events ---------------------------------------------------------------------


class EventStream:
    """A raw SSE reader over one HTTP connection."""

    def __init__(self, port: int, path: str, headers: dict[str, str] | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()

    def events(self, count: int, timeout: float = 30.0) -> list[tuple[str, Any]]:
        found: list[tuple[str, Any]] = []
        event_id, data = "", None
        deadline = time.monotonic() + timeout
        while len(found) < count:
            assert time.monotonic() < deadline, f"only {len(found)} events"
            line = self.response.readline().decode().rstrip("\n")
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                found.append((event_id, data))
                data = None
        return found

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def streams(api: Client) -> Iterator[Callable[..., EventStream]]:
    opened: list[EventStream] = []

    def open_stream(path: str, headers: dict[str, str] | None = None) -> EventStream:
        stream = EventStream(api.port, path, headers)
        opened.append(stream)
        return stream

    yield open_stream
    for stream in opened:
        stream.close()


def test_realtime_streams_and_resumes_from_last_event_id(
    api: Client, topic_factory: Callable[..., str], streams: Callable[..., EventStream]
) -> None:
    topic = topic_factory("saw", partitions=3)
    first = [{"n": i} for i in range(6)]
    for message in first:
        push(api, topic, message)
    stream = streams(f"/realtime/{topic}")
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == "text/event-stream"
    got = stream.events(6)  # what was there (sawmill's start: the beginning)
    assert sorted(d["n"] for _, d in got) == list(range(6))
    live = [{"n": i} for i in range(6, 10)]
    for message in live:  # then what comes, as it comes
        push(api, topic, message)
    got += stream.events(4)
    assert sorted(d["n"] for _, d in got) == list(range(10))
    last_id = got[-1][0]
    stream.close()

    missed = [{"n": i} for i in range(10, 16)]
    for message in missed:  # published while no one listened
        push(api, topic, message)
    resumed = streams(f"/realtime/{topic}", {"Last-Event-ID": last_id})
    again = resumed.events(6)
    assert sorted(d["n"] for _, d in again) == list(range(10, 16))  # no loss, no repeat
    push(api, topic, {"n": 16})
    assert resumed.events(1)[0][1] == {"n": 16}

    from_end = streams(f"/realtime/{topic}?offset=end")
    push(api, topic, {"n": 17})
    assert from_end.events(1)[0][1] == {"n": 17}


def test_a_quiet_stream_sends_heartbeats(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("saw", partitions=1)
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True, sse_heartbeat_s=0.5
    ) as svc:
        stream = EventStream(svc.port, f"/realtime/{topic}")
        try:
            lines = [stream.response.readline() for _ in range(4)]
        finally:
            stream.close()
    assert lines[0] == b"retry: 1000\n"
    assert b": keep-alive\n" in lines


def test_the_token_header_carries_our_credentials(
    stack: Endpoints,
    store_factory: Callable[[], KafkaStore],  # noqa: F811
    topic_factory: Callable[..., str],
) -> None:
    store = store_factory()
    registry = Registry.open(store, local_admin("test"), write=True)
    secret = registry.create_account("sawyer", [Role.API]).secret
    topic = topic_factory("saw", partitions=1)
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, registry_auth=True, registry_topic=store.topic
    ) as svc:
        client = Client(svc.port)
        missing = client.request("GET", "/topics/")
        assert missing.status == 400
        assert missing.json() == {"status": "token rejected", "message": "Missing Token!"}
        wrong = client.request("GET", "/topics/", headers={"token": "sawyer:wrong"})
        assert wrong.status == 401
        assert wrong.json() == {"status": "token rejected", "message": "Invalid Token"}
        good = {"token": f"sawyer:{secret}"}
        listing = client.request("GET", "/topics/", headers=good)
        assert listing.status == 200
        assert isinstance(listing.json(), list)
        push(client, topic, {"a": 1}, headers=good)
        assert client.request("GET", f"/consume/{topic}", headers=good).json() == [{"a": 1}]
        assert client.request("GET", "/connection/").status == 200  # no token, as sawmill
