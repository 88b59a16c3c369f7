"""MR topics' AMQP addresses and their consumer groups (pure)."""

from __future__ import annotations

from amqp.model import Cond, Refusal
from amqp.topic_model import TopicAddress, parse_topic_address, topic_group_id


def test_topic_addresses_and_groups() -> None:
    assert parse_topic_address("topic/iot.acme.orders") == TopicAddress("iot.acme.orders")
    assert parse_topic_address("topic/orders::billing") == TopicAddress("orders", "billing")
    for other in (None, "", "queue/orders", "telemetry/acme", "topics/orders"):
        assert parse_topic_address(other) is None
    for bad in ("topic/", "topic/a b", "topic/a/b", "topic/..", "topic/x::", "topic/x::a b"):
        found = parse_topic_address(bad)
        assert isinstance(found, Refusal), bad
        assert found.condition is Cond.NOT_FOUND
    assert topic_group_id(TopicAddress("orders", "billing"), "link-1") == (
        "iot-amqp.topic.orders.billing"
    )
    assert topic_group_id(TopicAddress("orders"), "link-1") == "iot-amqp.topic.orders.link-1"
