"""End to end with the real Kafka: known telemetry in, the streaming job (availableNow), tables out.

The records are produced here (a known set with planted gaps and duplicates), so every
expected count is computed from what was sent, independently of the job.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import stream
from spark_jobs.cli import main
from spark_jobs.config import AnalyticsConfig

pytestmark = [pytest.mark.spark, pytest.mark.integration]

DEVICES = ("d1", "d2", "d3")
STEP_S = 5  # one record per device every 5 s: 12 per minute
CLOCK_DEVICE = "zz-clock"  # one record far ahead, so the watermark closes the minutes sent


def _produce(bootstrap: str, topic: str, records: list[tuple[str | None, bytes, int]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
        }
    )
    for key, value, received_at in records:
        producer.produce(
            topic,
            key=key.encode() if key is not None else None,
            value=value,
            headers=[("received_at", str(received_at).encode()), ("qos", b"1")],
        )
    assert producer.flush(30) == 0


def _telemetry(
    base_ms: int, minutes: range, skip: set[tuple[str, int]], dup: set[tuple[str, int]]
) -> tuple[list[tuple[str | None, bytes, int]], Counter[tuple[str, int]]]:
    """Records for DEVICES over ``minutes``; returns them and the count per (device, minute)."""
    per_minute = 60 // STEP_S
    records: list[tuple[str | None, bytes, int]] = []
    sent: Counter[tuple[str, int]] = Counter()
    for device in DEVICES:
        for minute in minutes:
            for i in range(per_minute):
                seq = minute * per_minute + i + 1
                if (device, seq) in skip:
                    continue
                ts = base_ms + minute * 60_000 + i * STEP_S * 1000 + 500
                body = {"ts": ts, "seq": seq, "metrics": {"temperature": 20.0 + i % 3}}
                copies = 2 if (device, seq) in dup else 1
                for _ in range(copies):
                    records.append((device, json.dumps(body).encode(), ts + 20))
                    sent[(device, minute)] += 1
    return records, sent


def _clock(base_ms: int, minute: int) -> tuple[str, bytes, int]:
    ts = base_ms + minute * 60_000
    body = {"ts": ts, "seq": minute, "metrics": {"temperature": 0.0}}
    return (CLOCK_DEVICE, json.dumps(body).encode(), ts)


def _device_minute(spark: Any, warehouse: Path, base_ms: int) -> dict[tuple[str, int], Any]:
    rows = spark.read.format("delta").load(str(warehouse / "device_minute")).collect()
    out: dict[tuple[str, int], Any] = {}
    for r in rows:
        if r["device_id"] == CLOCK_DEVICE:
            continue
        minute = (
            int(r["window_start"].replace(tzinfo=dt.UTC).timestamp()) * 1000 - base_ms
        ) // 60_000
        key = (r["device_id"], minute)
        assert key not in out, f"{key} written twice"
        out[key] = r
    return out


def _minute_counts(warehouse: Path, base_ms: int) -> dict[tuple[str, int], int]:
    """device_minute's messages per (device, minute), as `_device_minute` but read without Spark
    (delta-rs, through the table's log as the console and the report read it): for the tests that
    poll the table while a job writes it, where a read in a Spark driver costs CPU every second."""
    import pyarrow as pa

    from spark_jobs import lake

    table = lake.dataset(warehouse, "device_minute").to_table(
        columns=["device_id", "window_start", "messages"]
    )
    starts = table.column("window_start").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    out: dict[tuple[str, int], int] = {}
    for device, start_us, messages in zip(
        table.column("device_id").to_pylist(),
        starts.to_pylist(),
        table.column("messages").to_pylist(),
        strict=True,
    ):
        if device == CLOCK_DEVICE:
            continue
        key = (device, (start_us // 1000 - base_ms) // 60_000)
        assert key not in out, f"{key} written twice"
        out[key] = int(messages)
    return out


def test_stream_job_counts_gaps_duplicates_restart_and_sql(
    spark: Any,
    stack: Any,
    topic_factory: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    telemetry_topic = topic_factory(prefix="spark-telemetry", partitions=3)
    presence_topic = topic_factory(prefix="spark-presence", partitions=3, compacted=True)
    warehouse = tmp_path / "warehouse"
    cfg = AnalyticsConfig.load(
        env={},
        kafka_bootstrap=stack.kafka_bootstrap,
        topic_telemetry=telemetry_topic,
        topic_presence=presence_topic,
        warehouse_dir=warehouse,
        spark_master="local[2]",
        shuffle_partitions=2,
        watermark="30 seconds",
        # the four tables it checks: anomalies (a pandas state function, Python workers in
        # every batch) only add CPU here; test_tenants.py and test_sim_e2e.py check them
        tables=("device_minute", "fleet_minute", "device_status", "rejects"),
    )
    now_ms = int(time.time() * 1000)
    base_ms = (now_ms // 60_000 - 30) * 60_000  # a whole minute, half an hour ago

    # wave 1: minutes 0-2; gaps d1 seq 5,6 (minute 0) and d2 seq 20 (minute 1); d3 seq 3 twice
    skip = {("d1", 5), ("d1", 6), ("d2", 20)}
    dup = {("d3", 3)}
    records, sent = _telemetry(base_ms, range(3), skip, dup)
    records.append((None, b"no key", now_ms))
    records.append(("d1", b"{not json", now_ms))
    records.append(_clock(base_ms, 4))  # watermark 3:30: minutes 0-2 close
    _produce(stack.kafka_bootstrap, telemetry_topic, records)
    _produce(
        stack.kafka_bootstrap,
        presence_topic,
        [("d1", json.dumps({"online": False, "at": now_ms + 60_000}).encode(), now_ms)],
    )

    assert stream.run(cfg, available_now=True, spark=spark) == 0
    got = _device_minute(spark, warehouse, base_ms)
    assert {k: r["messages"] for k, r in got.items()} == dict(sent)
    gaps = {k: r["missing_seq"] for k, r in got.items() if r["missing_seq"]}
    assert gaps == {("d1", 0): 2, ("d2", 1): 1}
    dups = {k: r["duplicates"] for k, r in got.items() if r["duplicates"]}
    assert dups == {("d3", 0): 1}
    rejects = spark.read.format("delta").load(str(warehouse / "rejects")).collect()
    assert sorted(r["reason"] for r in rejects) == ["no_key", "not_json"]
    fleet = (
        spark.read.format("delta")
        .load(str(warehouse / "fleet_minute"))
        .where(f"window_start < timestamp_millis({base_ms + 3 * 60_000})")
    )
    assert sorted(r["messages"] for r in fleet.collect()) == sorted(
        sum(n for (_, m), n in sent.items() if m == minute) for minute in range(3)
    )
    status = {
        r["device_id"]: r
        for r in spark.read.format("delta").load(str(warehouse / "device_status")).collect()
    }
    assert status["d1"]["online"] is False
    assert status["d1"]["reason"] == "presence"
    assert status["d2"]["last_seq"] == 36

    # wave 2 after a restart from the checkpoints: minutes 5-6 (after the watermark), the
    # clock moves to 8 (minute 4, the clock's own, closes too)
    records2, sent2 = _telemetry(base_ms, range(5, 7), set(), set())
    records2.append(_clock(base_ms, 8))
    _produce(stack.kafka_bootstrap, telemetry_topic, records2)
    assert stream.run(cfg, available_now=True, spark=spark) == 0
    got = _device_minute(spark, warehouse, base_ms)  # asserts no (device, minute) twice
    assert {k: r["messages"] for k, r in got.items()} == dict(sent + sent2)

    # a third run with nothing new adds nothing
    assert stream.run(cfg, available_now=True, spark=spark) == 0
    assert sum(r["messages"] for r in _device_minute(spark, warehouse, base_ms).values()) == sum(
        (sent + sent2).values()
    )

    # iot-analytics sql over the written tables
    capsys.readouterr()
    code = main(
        [
            "sql",
            "--warehouse-dir",
            str(warehouse),
            "--format",
            "csv",
            f"SELECT device_id, SUM(messages) AS n, SUM(missing_seq) AS gaps FROM device_minute "
            f"WHERE device_id <> '{CLOCK_DEVICE}' GROUP BY device_id ORDER BY device_id",
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    totals: Counter[str] = Counter()
    for (device, _), n in (sent + sent2).items():
        totals[device] += n
    assert lines == [
        "device_id,n,gaps",
        f"d1,{totals['d1']},2",
        f"d2,{totals['d2']},1",
        f"d3,{totals['d3']},0",
    ]
