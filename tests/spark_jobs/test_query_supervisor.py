"""QuerySupervisor on a real (local) Spark session: a failed query is restarted from its
checkpoint after its backoff, and the failed batch is replayed, not skipped."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.config import AnalyticsConfig
from spark_jobs.query_health import HealthSettings
from spark_jobs.query_supervisor import QuerySupervisor

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_failed_query_restarts_from_its_checkpoint_with_backoff(
    spark: Any, spark_config: AnalyticsConfig, tmp_path: Path
) -> None:
    cfg = AnalyticsConfig.load(
        env={},
        kafka_bootstrap="127.0.0.1:1",  # the stall check finds no Kafka: reported, not fatal
        warehouse_dir=tmp_path / "warehouse",
        spark_master="local[2]",
    )
    checkpoint = tmp_path / "ckpt"
    attempts: list[tuple[int, int]] = []  # (batch id, rows) per call, failed ones included
    failed_once = threading.Event()

    def sink(batch: Any, batch_id: int) -> None:
        attempts.append((batch_id, batch.count()))
        if batch_id == 1 and not failed_once.is_set():
            failed_once.set()
            raise RuntimeError("sink away (stands in for STREAM_FAILED)")

    def build() -> Any:
        source = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
        return (
            source.writeStream.queryName("probe")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="1 second")
            .foreachBatch(sink)
            .start()
        )

    settings = HealthSettings(restart_initial_s=3, restart_max_s=10, check_interval_s=2)
    supervisor = QuerySupervisor(cfg, {"probe": build}, settings)
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            health = supervisor.snapshot()
            if health.query("probe").restarts == 1 and max(b for b, _ in attempts) >= 3:
                break
            time.sleep(0.5)
        health = supervisor.snapshot()
    finally:
        stop.set()
        thread.join(60)
        supervisor.stop_all()
        spark.streams.resetTerminated()  # the session is shared: leave no failure behind
    probe = health.query("probe")
    assert probe.restarts == 1
    assert probe.active
    assert probe.last_error is not None
    assert "sink away" in probe.last_error
    assert health.kafka_reachable is False
    ids = [b for b, _ in attempts]
    # batch 1 ran twice (failed, then replayed from the checkpoint), nothing was skipped
    assert ids.count(1) == 2
    assert sorted(set(ids)) == list(range(max(ids) + 1))
    first, again = [rows for b, rows in attempts if b == 1]
    assert first == again  # the same offsets: the replay reads what the failed attempt read
