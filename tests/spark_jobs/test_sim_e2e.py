"""The simulator's run through the real bridge, then the stream job (availableNow).

Ground truth: the simulator's manifest (what each device sent, which readings it made
anomalous) and the telemetry topic itself read with a plain Kafka consumer (which minute each
record belongs to), both independent of Spark.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import stream
from spark_jobs.anomaly import score_against_manifest
from spark_jobs.config import AnalyticsConfig
from tests.plugins.mqtt_logins import sim_login_args

pytestmark = [pytest.mark.spark, pytest.mark.integration]

CLOCK_DEVICE = "zz-clock"


def _read_topic(bootstrap: str, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """Every (key, JSON value) of ``topic``, read to its end offsets."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        parts = []
        for p in meta.partitions:
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0:
                ends[p] = high
                parts.append(TopicPartition(topic, p, 0))
        c.assign(parts)
        out: list[tuple[str, dict[str, Any]]] = []
        deadline = time.monotonic() + 30
        while ends and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            key, value, offset = msg.key(), msg.value(), msg.offset()
            assert key is not None
            assert value is not None
            assert offset is not None
            out.append((key.decode(), json.loads(value)))
            if offset + 1 >= ends.get(msg.partition(), 0):
                ends.pop(msg.partition(), None)
        assert not ends, f"could not read {topic} to its end"
        return out
    finally:
        c.close()


def test_simulator_through_bridge_into_device_minute(
    spark: Any,
    stack: Any,
    bridge_factory: Any,
    topic_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    from confluent_kafka import Producer

    from device_sim import manifest as manifest_io
    from device_sim.cli import main as sim_main

    telemetry = topic_factory(prefix="spark-sim-tel", partitions=3)
    dlq = topic_factory(prefix="spark-sim-dlq", partitions=3)
    presence = topic_factory(prefix="spark-sim-pres", partitions=3, compacted=True)
    bridge_factory(topic_telemetry=telemetry, topic_dlq=dlq, topic_presence=presence)
    runs = tmp_path / "runs"
    prefix = f"sp{uuid.uuid4().hex[:6]}"
    rc = sim_main(
        [
            "run", "--devices", "8", "--rate", "5", "--count", "40", "--seed", "11",
            "--device-prefix", prefix, "--anomaly-rate", "0.05", "--session-expiry-s", "5",
            "--no-progress", "--mqtt-host", stack.mqtt_host, "--mqtt-port", str(stack.mqtt_port),
            *sim_login_args(stack.mqtt_port),
            "--kafka-bootstrap", stack.kafka_bootstrap, "--topic-telemetry", telemetry,
            "--topic-dlq", dlq, "--runs-dir", str(runs),
        ]
    )  # fmt: skip
    assert rc == 0
    manifest = manifest_io.read(manifest_io.latest(runs))
    sent = {d: int(info["sent"]) for d, info in manifest["devices"].items()}
    assert sum(sent.values()) == 8 * 40

    # what Kafka holds, per device and event-time minute (the bridge may add duplicates)
    # Mosquitto's PUBACK ends the simulator's run; the bridge may still be producing the tail,
    # so read until every sent (device, seq) is in Kafka.
    deadline = time.monotonic() + 30
    records = _read_topic(stack.kafka_bootstrap, telemetry)
    while len({(k, v["seq"]) for k, v in records}) < sum(sent.values()):
        assert time.monotonic() < deadline, "the bridge did not deliver the whole run"
        records = _read_topic(stack.kafka_bootstrap, telemetry)
    per_minute: Counter[tuple[str, int]] = Counter()
    for key, value in records:
        per_minute[(key, value["ts"] // 60_000)] += 1
    # one record two minutes ahead moves the watermark past every minute the devices used
    last_ts = max(v["ts"] for _, v in records)
    clock = {"ts": last_ts + 120_000, "seq": 1, "metrics": {"temperature": 0.0}}
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    producer.produce(telemetry, key=CLOCK_DEVICE.encode(), value=json.dumps(clock).encode())
    assert producer.flush(10) == 0

    cfg = AnalyticsConfig.load(
        env={}, kafka_bootstrap=stack.kafka_bootstrap, topic_telemetry=telemetry,
        topic_presence=presence, warehouse_dir=tmp_path / "wh", spark_master="local[2]",
        shuffle_partitions=2, watermark="30 seconds",
        tables=("device_minute", "anomalies"),  # the two it checks: the others only add CPU
    )  # fmt: skip
    assert stream.run(cfg, available_now=True, spark=spark) == 0

    rows = [
        r
        for r in spark.read.format("delta").load(str(cfg.table_path("device_minute"))).collect()
        if r["device_id"] != CLOCK_DEVICE
    ]
    got = {
        (r["device_id"], int(r["window_start"].replace(tzinfo=dt.UTC).timestamp()) // 60): r
        for r in rows
    }
    assert len(got) == len(rows)  # no (device, minute) written twice
    assert {k: r["messages"] for k, r in got.items()} == dict(per_minute)
    distinct: Counter[str] = Counter()
    for (device, _), r in got.items():
        distinct[device] += r["distinct_seq"]
        assert r["missing_seq"] == 0  # QoS 1, nothing unacknowledged: no gaps
    assert dict(distinct) == sent

    # anomalies: every planted anomaly with enough history before it is found, and every
    # temperature/humidity detection is a planted one (vibration has natural spikes)
    detected = [
        (r["device_id"], r["seq"], r["metric"])
        for r in spark.read.format("delta").load(str(cfg.table_path("anomalies"))).collect()
    ]
    scorable = [
        a for a in manifest["injections"]["anomalies"] if int(a["seq"]) > cfg.anomaly_min_history
    ]
    assert scorable, "the seed plants anomalies after the warm-up"
    score = score_against_manifest(detected, {"injections": {"anomalies": scorable}})
    assert score.recall == 1.0
    planted = {
        (a["device"], int(a["seq"]), a["metric"]) for a in manifest["injections"]["anomalies"]
    }
    assert [d for d in detected if d[2] != "vibration" and d not in planted] == []
