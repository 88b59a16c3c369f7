"""POST /events/{topic} on the real Kafka: every framing, 200 only once Kafka holds the records."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import pytest

from tests.api.harness import Client, read_topic
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def test_json_array_and_object_land_compact_in_kafka(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("api", partitions=3)
    reply = api.publish(topic, '[{"a": 1}, {"b": [1, 2]}]')
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/json")
    body = reply.json()
    assert body["count"] == 2
    assert isinstance(body["serverTimeMs"], int)
    assert api.publish(topic, '{"c": "x", "cambria.partition": "k1"}').json()["count"] == 1
    # 200 came after Kafka acknowledged: the records are there now
    records = read_topic(stack.kafka_bootstrap, topic, 3)
    assert sorted(v for _, v in records) == sorted(
        [b'{"a":1}', b'{"b":[1,2]}', b'{"c":"x","cambria.partition":"k1"}']
    )
    assert (b"k1", b'{"c":"x","cambria.partition":"k1"}') in records


def test_partition_key_keys_every_record(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("api", partitions=3)
    reply = api.publish(topic, "one\ntwo\r\nthree\n", "text/plain", query="?partitionKey=dev-7")
    assert reply.json()["count"] == 3
    records = read_topic(stack.kafka_bootstrap, topic, 3)
    assert records == [(b"dev-7", b"one"), (b"dev-7", b"two"), (b"dev-7", b"three")]


def test_text_plain_lines_and_interior_empty_line(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("api", partitions=1)
    assert api.publish(topic, "a\n\nb", "text/plain; charset=UTF-8").json()["count"] == 3
    assert [v for _, v in read_topic(stack.kafka_bootstrap, topic, 3)] == [b"a", b"", b"b"]


def test_cambria_golden_vector_and_zip(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("api", partitions=1)
    assert api.publish(topic, "4.11.asdfhello world", "application/cambria").json()["count"] == 1
    zipped = gzip.compress(b"1.2.kv1\n0.3.xyz\n")
    assert api.publish(topic, zipped, "application/cambria-zip").json()["count"] == 2
    records = read_topic(stack.kafka_bootstrap, topic, 3)
    assert records[0] == (b"asdf", b"hello world")
    assert records[1] == (b"k", b"v1")
    assert records[2][1] == b"xyz"


def test_other_content_types_are_one_raw_message(
    api: Client, stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("api", partitions=1)
    raw = bytes(range(256))
    assert api.publish(topic, raw, "application/octet-stream").json()["count"] == 1
    assert api.publish(topic, b"x\ny", "image/png").json()["count"] == 1
    assert [v for _, v in read_topic(stack.kafka_bootstrap, topic, 2)] == [raw, b"x\ny"]


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("application/json", "nope", "Expecting an array or an object."),
        ("application/json", "[1, 2]", "Expected { to start an object."),
        ("application/json", '[{"a":1} {"b":2}]', "Incorrect JSON object."),
        ("application/cambria", "4x11.asdfhello world", "Expected . after length."),
        ("application/cambria", "4.11.asdfhello", "End of stream while reading 15 bytes"),
        ("application/cambria-zip", "not gzip", "Couldn't read compressed format:"),
    ],
)
def test_malformed_bodies_are_400_with_mr_error_body_and_publish_nothing(
    api: Client,
    stack: Endpoints,
    topic_factory: Callable[..., str],
    content_type: str,
    body: str,
    message: str,
) -> None:
    topic = topic_factory("api", partitions=1)
    reply = api.publish(topic, body, content_type)
    assert reply.status == 400
    assert reply.headers["Content-Type"].startswith("application/json")
    error = reply.json()
    assert set(error) == {"mrstatus", "helpURL", "message", "status"}
    assert error["status"] == 400
    assert error["helpURL"] == "http://onap.readthedocs.io"
    assert error["message"].startswith(message)
    assert read_topic(stack.kafka_bootstrap, topic, 1, timeout=3) == []


def test_empty_array_is_count_zero(api: Client, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory("api", partitions=1)
    assert api.publish(topic, "[]").json()["count"] == 0


def test_publish_creates_an_unknown_topic(api: Client, stack: Endpoints) -> None:
    import uuid

    topic = f"api.auto.{uuid.uuid4().hex[:10]}"
    assert api.publish(topic, json.dumps({"topicName": topic})).status == 200
    assert topic in api.request("GET", "/topics").json()["topics"]
    assert (
        read_topic(stack.kafka_bootstrap, topic, 1)[0][1]
        == json.dumps({"topicName": topic}, separators=(",", ":")).encode()
    )


def test_limits_are_413_with_mr_codes(api: Client, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory("api", partitions=1)
    big = b"x" * (1048576 + 1)
    reply = api.publish(topic, big, "application/octet-stream")
    assert reply.status == 413
    assert reply.json()["mrstatus"] == 5004
    assert reply.json()["message"].startswith("Message size exceeds the default size.")
    lines = b"\n".join([b"y" * 1_000_000] * 11)  # 11 MB of lines, each within the message limit
    reply = api.publish(topic, lines, "text/plain")
    assert reply.status == 413
    assert reply.json()["mrstatus"] == 5001
    bomb = gzip.compress(b"1.1.ab" + b" " * (11 * 1024 * 1024))
    reply = api.publish(topic, bomb, "application/cambria-zip")
    assert reply.status == 413
    assert reply.json()["mrstatus"] == 5001
    # exactly at the message limit is fine
    assert api.publish(topic, b"z" * 1048576, "application/octet-stream").status == 200


def test_invalid_topic_name_is_400(api: Client) -> None:
    reply = api.publish("bad%20name", "{}")
    assert reply.status == 400
    assert reply.json()["status"] == 400
