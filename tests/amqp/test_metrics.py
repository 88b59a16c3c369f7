"""iot-amqp's metrics (amqp/metrics.py): the long-lived consumers' stall counts (issue 32)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from amqp.metrics import AmqpMetrics
from kafka_watch.stall import StallJudge


def test_stalls_are_counted_by_kind_and_failing_sums_the_live_judges() -> None:
    registry = CollectorRegistry()
    stats = AmqpMetrics(registry)
    north = StallJudge("north a", 3.0)
    tally = stats.watched("north", north)
    north.check(0.0, {("t", 0): 1}, {("t", 0): 5})
    north.check(1.0, {("t", 0): 1}, {("t", 0): 5})  # behind, not moving: 1 failing
    stats.renewed("replies")
    tally.renewals += 1  # as a queue member's owner counts it
    value = registry.get_sample_value
    assert value("iot_amqp_kafka_consumer_failing", {"consumer": "north"}) == 1
    assert value("iot_amqp_kafka_consumer_renewals_total", {"consumer": "north"}) == 1
    assert value("iot_amqp_kafka_consumer_renewals_total", {"consumer": "replies"}) == 1
    assert value("iot_amqp_kafka_consumer_renewals_total", {"consumer": "queue"}) == 0
    del north, tally
    assert value("iot_amqp_kafka_consumer_failing", {"consumer": "north"}) == 0  # gone


def test_the_registry_followers_own_count_shows_once_it_is_started() -> None:
    registry = CollectorRegistry()
    stats = AmqpMetrics(registry)
    value = registry.get_sample_value
    assert value("iot_amqp_kafka_consumer_renewals_total", {"consumer": "registry"}) == 0
    follower = StallJudge("registry-follower", 3.0)
    stats.registry_follower = lambda: follower
    follower.renewed()
    assert value("iot_amqp_kafka_consumer_renewals_total", {"consumer": "registry"}) == 1
