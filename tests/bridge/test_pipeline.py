"""The telemetry pipeline's ack ordering, back-pressure and failure handling, with fake clients."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaError

from bridge.pending import set_clock
from bridge.service import TelemetryBridge
from tests.bridge.fakes import GOOD, FakeProducer, FakeSubscriber


def test_acks_wait_for_kafka_and_go_out_in_arrival_order(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    for mid, device in ((11, "a"), (12, "b"), (13, "a")):
        bridge.on_publish(f"devices/{device}/telemetry", GOOD, 1, mid, False)
        bridge.on_read_done()  # a socket read each: each its own group
    bridge.on_publish("devices/c/telemetry", GOOD, 0, 0, False)  # QoS 0: nothing to ack
    assert sub.acks == []
    producer.deliver(1)  # b's partition confirms first
    bridge._drain()
    assert sub.acks == []  # 11 is still unconfirmed
    producer.deliver(0)
    producer.deliver(3)
    bridge._drain()
    assert sub.acks == [11, 12]
    producer.deliver(2)
    bridge._drain()
    assert sub.acks == [11, 12, 13]
    assert bridge.stats.produced["telemetry"] == 4
    assert bridge.window.count == 0


def test_the_messages_of_one_read_are_acknowledged_together(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    for mid, device in ((1, "a"), (2, "b"), (3, "c")):
        bridge.on_publish(f"devices/{device}/telemetry", GOOD, 1, mid, False)
    bridge.on_read_done()
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 4, False)  # the next read
    bridge.on_read_done()
    producer.deliver(0)
    producer.deliver(1)
    producer.deliver(3)
    bridge._drain()
    assert sub.acks == []  # 3, the last of the first read, is not confirmed yet
    producer.deliver(2)
    bridge._drain()
    assert sub.acks == [1, 2, 3, 4]
    assert bridge.stats.produced["telemetry"] == 4
    assert sum(bridge.stats.latency.counts) == 4  # the histograms count messages, not groups
    assert sum(bridge.stats.ack_lag.counts) == 4


def test_a_group_released_before_its_read_ended_takes_no_more_messages(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 1, False)
    producer.deliver(0)
    bridge._drain()
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 2, False)  # no on_read_done between
    producer.deliver(1)
    bridge._drain()
    assert sub.acks == [1, 2]
    assert bridge.window.count == 0


def test_bad_input_is_produced_to_dlq_and_acked(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    bridge.on_publish("devices/a/telemetry", b"nope", 1, 1, False)
    assert producer.queue[0][0] == "iot.dlq"
    producer.deliver(0)
    bridge._drain()
    assert sub.acks == [1]
    assert bridge.stats.dlq["not_json"] == 1
    assert bridge.stats.produced["dlq"] == 1


def test_pending_bound_pauses_reading_and_resumes_below_it(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    for mid in range(1, 6):
        bridge.on_publish("devices/a/telemetry", GOOD, 1, mid, False)
        bridge.on_read_done()
    assert sub.paused
    assert bridge.window.count == 5
    producer.deliver(0)
    bridge._drain()
    assert sub.paused  # 4 pending >= 0.8 * 5
    producer.deliver(1)
    bridge._drain()
    assert not sub.paused
    assert sub.acks == [1, 2]


def test_full_producer_queue_backlogs_in_order(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    producer.full = True
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 1, False)
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 2, False)
    assert sub.paused
    assert producer.queue == []
    producer.full = False
    bridge._drain()
    assert len(producer.queue) == 2
    producer.deliver(0)
    producer.deliver(1)
    bridge._drain()
    assert sub.acks == [1, 2]


def test_failed_delivery_drops_connection_and_never_acks_past_it(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    for mid in (1, 2, 3):
        bridge.on_publish("devices/a/telemetry", GOOD, 1, mid, False)
        bridge.on_read_done()
    producer.deliver(0)
    producer.deliver(1, KafkaError(KafkaError._MSG_TIMED_OUT))
    producer.deliver(2)
    bridge._drain()
    assert sub.acks == [1]
    assert sub.dropped == 1
    assert bridge._fatal is None


def test_unknown_topic_delivery_error_is_fatal(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    bridge._stop_requested = asyncio.Event()
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 1, False)
    producer.deliver(0, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    bridge._drain()
    assert sub.acks == []
    assert bridge._fatal is not None
    assert not bridge.ready


TENANT_TOPIC = "tenants/acme/devices/a/telemetry"


def test_tenant_records_go_to_the_tenants_topics_once_ready(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    asked: list[str] = []
    bridge.request_tenant = asked.append  # type: ignore[method-assign,assignment]
    bridge.on_publish(TENANT_TOPIC, GOOD, 1, 1, False)
    bridge.on_publish(TENANT_TOPIC, GOOD, 1, 2, False)
    # topics not checked yet: default DLQ, coded, asked for once
    assert [q[0] for q in producer.queue] == ["iot.dlq", "iot.dlq"]
    assert asked == ["acme"]
    assert bridge.stats.tenant_dlq["acme", "tenant_not_ready"] == 2
    bridge.apply_tenants(frozenset({"acme"}), {})
    bridge.on_publish(TENANT_TOPIC, GOOD, 1, 3, False)
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 4, False)
    assert [q[0] for q in producer.queue[2:]] == ["iot.acme.telemetry", "iot.telemetry"]
    for i in range(4):
        producer.deliver(i)
    bridge._drain()
    assert sub.acks == [1, 2, 3, 4]
    assert bridge.stats.produced == {"dlq": 2, "telemetry": 2}
    assert bridge.stats.tenant_received == {"acme": 3, "default": 1}


def test_over_quota_messages_get_coded_dead_letters_others_untouched(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    bridge.config = bridge.config.with_changes(pending_max_messages=100)
    bridge.apply_tenants(frozenset({"acme", "beta"}), {"acme": 2.0})
    for mid in range(1, 5):
        bridge.on_publish(TENANT_TOPIC, GOOD, 1, mid, False)
        bridge.on_publish("tenants/beta/devices/a/telemetry", GOOD, 1, 100 + mid, False)
    topics = [q[0] for q in producer.queue]
    assert topics.count("iot.acme.telemetry") == 2
    assert topics.count("iot.acme.dlq") == 2  # the 3rd and 4th of the same second
    assert topics.count("iot.beta.telemetry") == 4
    assert bridge.stats.tenant_dlq == {("acme", "quota_exceeded"): 2}
    for i in range(len(producer.queue)):
        producer.deliver(i)
    bridge._drain()
    assert len(sub.acks) == 8  # dead letters are acknowledged once Kafka holds them


def test_a_message_at_a_low_rate_is_flushed_at_the_next_tick(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, producer, sub = rig
    bridge._tick()
    assert producer.flushes == []  # nothing produced: no flush
    bridge.on_publish("devices/a/telemetry", GOOD, 1, 1, False)
    bridge._tick()
    assert len(producer.flushes) == 1  # the adaptive linger cut the producer's linger short
    assert 0 < producer.flushes[0] <= 0.002
    bridge._tick()
    assert len(producer.flushes) == 1  # already sent: no second flush
    producer.deliver(0)
    bridge._drain()
    assert sub.acks == [1]
    if bridge._tick_handle is not None:
        bridge._tick_handle.cancel()


def test_the_adaptive_linger_can_be_turned_off() -> None:
    from bridge.config import BridgeConfig

    bridge = TelemetryBridge(BridgeConfig(kafka_adaptive_linger_ms=0))
    assert bridge.linger is None
    capped = TelemetryBridge(BridgeConfig(kafka_linger_ms=5, kafka_adaptive_linger_ms=20))
    assert capped.linger is not None
    assert capped.linger.policy.max_s == 0.005  # never more than the producer's own linger


def test_ack_lag_is_the_wait_of_a_confirmed_message_behind_an_unconfirmed_one(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bridge, producer, sub = rig
    for mid, device in ((11, "a"), (12, "b")):
        bridge.on_publish(f"devices/{device}/telemetry", GOOD, 1, mid, False)
        bridge.on_read_done()
    bridge.on_publish("devices/c/telemetry", GOOD, 0, 0, False)  # QoS 0: no PUBACK, no lag
    set_clock(100.0)  # the tick's poll at t=100 s
    producer.deliver(1)  # 12 confirmed at t=100 s, behind 11
    producer.deliver(2)
    set_clock(100.4)
    producer.deliver(0)  # 11 at t=100.4 s
    monkeypatch.setattr("bridge.pipeline.time.monotonic", lambda: 100.4)
    bridge._drain()
    assert sub.acks == [11, 12]
    lag = bridge.stats.ack_lag
    assert sum(lag.counts) == 2
    assert lag.total == pytest.approx(0.4)
    assert lag.counts[0] == 1  # 11: acknowledged as soon as confirmed
    assert lag.counts[lag.buckets.index(0.5)] == 1  # 12: waited 0.4 s for 11
