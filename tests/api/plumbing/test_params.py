from __future__ import annotations

import pytest

from api.errors import ApiError
from api.plumbing.params import (
    check_topic_name,
    kafka_group_id,
    parse_create_topic,
    poll_params,
    topic_details,
)

POLL = {"default_timeout_ms": 10000, "max_timeout_ms": 60000, "default_limit": 4096}


def test_poll_params_follow_mr() -> None:
    assert poll_params(None, None, **POLL) == (p := poll_params("10000", "0", **POLL))
    assert (p.timeout_ms, p.limit) == (10000, 4096)
    assert poll_params("abc", "xyz", **POLL).limit == 4096  # non-numeric -> defaults
    assert poll_params("abc", "5", **POLL).timeout_ms == 10000
    assert poll_params("999999", "5", **POLL).timeout_ms == 60000  # capped (DEV)
    with pytest.raises(ApiError):
        poll_params("100", "-1", **POLL)


def test_group_naming_and_topic_names() -> None:
    assert kafka_group_id("CG1", "TestTopic1") == "CG1--TestTopic1"
    assert check_topic_name("a.b-c_D9") == "a.b-c_D9"
    for bad in ("", "a b", "x" * 250, "..", "é"):
        with pytest.raises(ApiError):
            check_topic_name(bad)


def test_create_body_strings_or_ints() -> None:
    strings = parse_create_topic(
        b'{"topicName":"t","topicDescription":"d","partitionCount":"2","replicationCount":"1",'
        b'"transactionEnabled":"true"}'
    )
    assert (strings.name, strings.description, strings.partitions) == ("t", "d", 2)
    assert (strings.replicas, strings.transactions) == (1, True)
    ints = parse_create_topic(b'{"topicName":"t","partitionCount":3,"transactionEnabled":false}')
    assert (ints.partitions, ints.replicas, ints.transactions) == (3, 0, False)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"{",
        b'{"topicName":1}',
        b'{"topicName":"t","partitionCount":"many"}',
        b'{"topicName":"t","partitionCount":0}',
        b'{"topicName":"t","replicationCount":4}',
        b'{"topicName":"bad name"}',
    ],
)
def test_bad_create_bodies(body: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        parse_create_topic(body)
    assert caught.value.status == 400


def test_topic_details_shape() -> None:
    assert topic_details("t") == {
        "name": "t",
        "description": "",
        "owner": "",
        "readerAcl": {"enabled": True, "users": []},
        "writerAcl": {"enabled": True, "users": []},
    }
