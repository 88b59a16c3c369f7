"""The bridge as a real process between real Mosquitto and Kafka (issue 3's required tests)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from bridge.partitioner import partition_for
from tests.bridge.helpers import (
    BackgroundPublisher,
    Publisher,
    Record,
    consume,
    device_prefix,
    publish_rounds,
    telemetry,
    wait_for,
)

pytestmark = pytest.mark.integration


def bridge_topics(
    topic_factory: Callable[..., str], bootstrap: str | None = None
) -> dict[str, str]:
    return {
        "topic_telemetry": topic_factory("tel", bootstrap=bootstrap),
        "topic_events": topic_factory("ev", bootstrap=bootstrap),
        "topic_dlq": topic_factory("dlq", bootstrap=bootstrap),
        "topic_presence": topic_factory("pres", compacted=True, bootstrap=bootstrap),
    }


def seqs_by_device(records: list[Record]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        seq = r.json()["seq"]
        assert isinstance(seq, int)
        out[r.key.decode()].append(seq)
    return out


def assert_complete(records: list[Record], devices: list[str], per_device: int) -> Counter[str]:
    """Every seq of every device present; per device one partition; returns duplicates/device."""
    by_device = seqs_by_device(records)
    assert sorted(by_device) == sorted(devices)
    dups: Counter[str] = Counter()
    for device, seqs in by_device.items():
        assert set(seqs) == set(range(per_device)), (
            f"{device} misses {set(range(per_device)) - set(seqs)}"
        )
        dups[device] = len(seqs) - per_device
    partitions = defaultdict(set)
    for r in records:
        assert r.key is not None
        partitions[r.key].add(r.partition)
    assert all(len(p) == 1 for p in partitions.values())
    return dups


def test_fleet_every_message_once_keyed_partitioned_in_order(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    bridge = bridge_factory(**topics)
    prefix = device_prefix()
    devices = [f"{prefix}{i:03d}" for i in range(200)]
    publish_rounds(stack.mqtt_host, stack.mqtt_port, devices, range(50))
    records = consume(
        stack.kafka_bootstrap, [topics["topic_telemetry"]], until=lambda rs: len(rs) >= 10_000
    )
    assert len(records) == 10_000  # each message exactly once (no failure happened)
    by_device = seqs_by_device(records)
    assert sorted(by_device) == sorted(devices)
    for device, seqs in by_device.items():
        assert seqs == list(range(50)), device  # in seq order inside the partition
    for r in records:
        assert r.key is not None
        assert r.partition == partition_for(r.key, 12)  # the Java client's partition
        assert r.headers["mqtt_topic"] == f"devices/{r.key.decode()}/telemetry".encode()
        assert r.headers["qos"] == b"1"
        assert int(r.headers["received_at"]) > 0
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= 10_000, 30, "all acks")
    assert bridge.metric("iot_bridge_produced_total", kind="telemetry") == 10_000
    assert bridge.metric("iot_bridge_pending_messages") == 0


BAD_INPUTS = [
    ("telemetry", b"{not json", "not_json"),
    ("telemetry", b"[1,2,3]", "not_object"),
    ("telemetry", b'{"seq": 1, "metrics": {}}', "missing_field"),
    ("telemetry", b'{"ts": "yesterday", "seq": 1, "metrics": {}}', "wrong_type"),
    ("telemetry", b'{"ts": 1, "seq": 1, "metrics": {"t": NaN}}', "non_finite"),
    (
        "telemetry",
        b'{"ts": 1, "seq": 1, "metrics": {}, "device_id": "someone-else"}',
        "device_mismatch",
    ),
    ("events", b'{"ts": 1, "seq": 1}', "missing_field"),
    ("status", b"sleepy", "bad_status"),
]


def test_bad_input_goes_to_dlq_while_good_traffic_continues(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    bridge = bridge_factory(max_payload_bytes=2048, **topics)
    prefix = device_prefix()
    good, bad = f"{prefix}good", f"{prefix}bad"
    pub = Publisher(stack.mqtt_host, stack.mqtt_port)
    expected: list[tuple[str, bytes, str, bytes | None]] = []
    seq = 0
    for channel, payload, code in BAD_INPUTS:
        pub.publish(f"devices/{good}/telemetry", telemetry(seq))
        seq += 1
        pub.publish(f"devices/{bad}/{channel}", payload)
        expected.append((f"devices/{bad}/{channel}", payload, code, bad.encode()))
    oversized = b'{"ts": 1, "seq": 1, "metrics": {}, "pad": "' + b"x" * 3000 + b'"}'
    pub.publish(f"devices/{bad}/telemetry", oversized)
    expected.append((f"devices/{bad}/telemetry", oversized, "oversized", bad.encode()))
    # a bad topic: a device id that breaks the id rule but still matches devices/+/telemetry
    pub.publish("devices/bad id!/telemetry", b"{}")
    expected.append(("devices/bad id!/telemetry", b"{}", "bad_topic", None))
    pub.publish(f"devices/{good}/telemetry", telemetry(seq))
    seq += 1
    pub.publish(f"devices/{good}/status", b"online")
    event = b'{"ts": 1700000000000, "seq": 0, "type": "door_open", "data": {"door": 2}}'
    pub.publish(f"devices/{good}/events", event)
    pub.wait_all()
    pub.close()
    dlq = consume(
        stack.kafka_bootstrap, [topics["topic_dlq"]], until=lambda rs: len(rs) >= len(expected)
    )
    got = [
        (r.headers["mqtt_topic"].decode(), r.value, r.headers["error"].decode(), r.key) for r in dlq
    ]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert all(r.headers["error_detail"] and int(r.headers["received_at"]) > 0 for r in dlq)
    tel = consume(
        stack.kafka_bootstrap, [topics["topic_telemetry"]], until=lambda rs: len(rs) >= seq
    )
    assert [r.json()["seq"] for r in tel] == list(range(seq))
    # the bridge's new subscription also gets the retained status of other tests' devices on the
    # shared Mosquitto (simulated devices retain theirs: a run failed reading one of them first)
    pres = consume(
        stack.kafka_bootstrap,
        [topics["topic_presence"]],
        until=lambda rs: any(r.key == good.encode() for r in rs),
    )
    assert [orjson.loads(r.value)["online"] for r in pres if r.key == good.encode()] == [True]
    events = consume(stack.kafka_bootstrap, [topics["topic_events"]], until=lambda rs: len(rs) >= 1)
    assert [(r.key, r.value) for r in events] == [(good.encode(), event)]
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= len(expected) + seq + 2, 30, "acks")
    codes = Counter(code for _, _, code, _ in expected)
    for code, n in codes.items():
        assert bridge.metric("iot_bridge_dlq_total", code=code) == n
    assert bridge.running


def test_sigterm_exits_zero_and_loses_nothing(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    bridge = bridge_factory(**topics)
    prefix = device_prefix()
    devices = [f"{prefix}{i:02d}" for i in range(20)]
    load = BackgroundPublisher(stack.mqtt_host, stack.mqtt_port, devices, 150, rate=1000).start()
    wait_for(
        lambda: bridge.metric("iot_bridge_acked_total") >= 800, 30, "traffic through the bridge"
    )
    assert bridge.stop() == 0
    assert any("SIGTERM" in d.get("msg", "") for d in bridge.log_lines())
    bridge.restart()
    load.join()
    records = consume(
        stack.kafka_bootstrap, [topics["topic_telemetry"]], until=lambda rs: len(rs) >= 3000
    )
    dups = assert_complete(records, devices, 150)
    assert sum(dups.values()) == len(records) - 3000


def test_kill9_then_restart_misses_no_seq(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    bridge = bridge_factory(**topics)
    prefix = device_prefix()
    devices = [f"{prefix}{i:02d}" for i in range(20)]
    load = BackgroundPublisher(stack.mqtt_host, stack.mqtt_port, devices, 150, rate=1000).start()
    wait_for(
        lambda: bridge.metric("iot_bridge_received_total", channel="telemetry") >= 800,
        30,
        "traffic",
    )
    assert bridge.kill() == -9
    bridge.start()
    load.join()
    records = consume(
        stack.kafka_bootstrap,
        [topics["topic_telemetry"]],
        until=lambda rs: bool(seqs_ok(rs, devices, 150)),
    )
    dups = assert_complete(records, devices, 150)
    print(f"duplicates after kill -9: {sum(dups.values())}")


def seqs_ok(records: list[Record], devices: list[str], per_device: int) -> list[str]:
    """[] until every device has every seq (used as a consume stop condition)."""
    have = seqs_by_device(records) if records else {}
    complete = [d for d in devices if set(have.get(d, [])) >= set(range(per_device))]
    return complete if len(complete) == len(devices) else []


def test_kafka_down_20s_nothing_lost_pending_bounded(
    local_stack_factory: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    local = local_stack_factory(partitions=3)
    topics = bridge_topics(topic_factory, bootstrap=local.kafka_bootstrap)
    bound = 400
    bridge = bridge_factory(
        local.mqtt_host,
        local.mqtt_port,
        local.kafka_bootstrap,
        pending_max_messages=bound,
        mqtt_receive_maximum=1000,
        **topics,
    )
    devices = [f"dev{i:02d}" for i in range(10)]
    load = BackgroundPublisher(local.mqtt_host, local.mqtt_port, devices, 300, rate=100).start()
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= 100, 30, "traffic")
    local.kafka.stop()
    down_at = time.monotonic()
    acked_at_stop = bridge.metric("iot_bridge_acked_total")
    wait_for(
        lambda: bridge.metric("iot_bridge_pending_messages") >= bound,
        30,
        "pending to reach the bound",
    )
    assert bridge.metric("iot_bridge_reading_paused") == 1
    wait_for(lambda: bridge.http_get("/readyz")[0] == 503, 30, "not ready while Kafka is down")
    assert bridge.http_get("/healthz")[0] == 200  # alive, just waiting
    # devices keep publishing (Mosquitto queues for the bridge's session) for 20 s
    wait_for(lambda: time.monotonic() - down_at >= 20, 30, "20 s of Kafka downtime")
    assert load.thread.is_alive()
    assert bridge.metric("iot_bridge_acked_total") <= acked_at_stop + bound
    local.kafka.start()
    load.join()
    records = consume(
        local.kafka_bootstrap,
        [topics["topic_telemetry"]],
        until=lambda rs: bool(seqs_ok(rs, devices, 300)),
        timeout=90,
    )
    assert_complete(records, devices, 300)
    assert bridge.running
    assert bridge.metric("iot_bridge_pending_high_water_messages") <= bound
    assert bridge.metric("iot_bridge_backpressure_pauses_total") >= 1


def test_missing_topic_is_fatal(stack: Any, bridge_factory: Any) -> None:
    bridge = bridge_factory(topic_telemetry="no.such.topic.for.bridge", wait_ready=False)
    assert bridge.wait_exit(60) == 1
    assert any(
        d.get("level") == "CRITICAL" and "no.such.topic.for.bridge" in d.get("msg", "")
        for d in bridge.log_lines()
    )


def test_reconnects_after_mosquitto_restart_and_keeps_its_session(
    local_stack_factory: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    local = local_stack_factory(partitions=3)
    topics = bridge_topics(topic_factory, bootstrap=local.kafka_bootstrap)
    bridge = bridge_factory(
        local.mqtt_host,
        local.mqtt_port,
        local.kafka_bootstrap,
        mqtt_reconnect_min_s=0.2,
        mqtt_reconnect_max_s=1.0,
        **topics,
    )
    publish_rounds(local.mqtt_host, local.mqtt_port, ["r1"], range(1))
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= 1, 30, "first message")
    local.mosquitto.stop()
    wait_for(lambda: bridge.http_get("/readyz")[0] == 503, 30, "not ready while MQTT is down")
    local.mosquitto.start()
    # published right after the restart, possibly before the bridge is back: the session
    # (kept in Mosquitto's persistence) holds the messages for it
    publish_rounds(local.mqtt_host, local.mqtt_port, ["r1"], range(1, 50))
    bridge.wait_ready(30)
    records = consume(
        local.kafka_bootstrap, [topics["topic_telemetry"]], until=lambda rs: len(rs) >= 50
    )
    assert sorted(r.json()["seq"] for r in records) == list(range(50))  # type: ignore[type-var]
    assert bridge.metric("iot_bridge_mqtt_connects") >= 2
    assert bridge.metric("iot_bridge_mqtt_errors_total", kind="disconnect") >= 1


def test_shared_subscription_splits_the_load_without_loss(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    group = f"g{device_prefix()[1:-1]}"
    first = bridge_factory(mqtt_share_group=group, **topics)
    second = bridge_factory(mqtt_share_group=group, **topics)
    prefix = device_prefix()
    devices = [f"{prefix}{i:02d}" for i in range(20)]
    publish_rounds(stack.mqtt_host, stack.mqtt_port, devices, range(50))
    records = consume(
        stack.kafka_bootstrap, [topics["topic_telemetry"]], until=lambda rs: len(rs) >= 1000
    )
    assert len(records) == 1000
    assert_complete(records, devices, 50)
    a = first.metric("iot_bridge_received_total", channel="telemetry")
    b = second.metric("iot_bridge_received_total", channel="telemetry")
    assert a + b == 1000
    assert a > 0
    assert b > 0


def test_retained_status_reaches_presence_once_not_on_every_restart(
    stack: Any, bridge_factory: Any, topic_factory: Callable[..., str]
) -> None:
    topics = bridge_topics(topic_factory)
    device = f"{device_prefix()}st"
    pub = Publisher(stack.mqtt_host, stack.mqtt_port)
    pub.client.publish(f"devices/{device}/status", b"online", qos=1, retain=True).wait_for_publish(
        10
    )
    bridge = bridge_factory(**topics)

    def mine(rs: list[Record]) -> list[Record]:
        return [r for r in rs if r.key == device.encode()]

    first = consume(
        stack.kafka_bootstrap, [topics["topic_presence"]], until=lambda rs: bool(mine(rs))
    )
    assert [orjson.loads(r.value)["online"] for r in mine(first)] == [True]
    bridge.restart()  # the session is resumed: no retained replay
    pub.publish(f"devices/{device}/status", b"offline")  # a live change still comes through
    pub.wait_all()
    # clear the retained message so later tests and sessions do not see it
    pub.client.publish(f"devices/{device}/status", b"", qos=1, retain=True).wait_for_publish(10)
    pub.close()
    after = consume(
        stack.kafka_bootstrap, [topics["topic_presence"]], until=lambda rs: len(mine(rs)) >= 2
    )
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= 2, 30, "acks")
    assert [orjson.loads(r.value)["online"] for r in mine(after)] == [True, False]
