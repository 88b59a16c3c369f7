"""The streaming job's recovery and stall logic, without Spark or Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.errors import ConfigError
from spark_jobs.query_health import (
    HealthSettings,
    JobHealth,
    QueryHealth,
    backlog,
    committed_offsets,
)

SETTINGS = HealthSettings(restart_initial_s=2, restart_max_s=20, stable_s=100, stall_after_s=30)


def _checkpoint(
    root: Path, batches: dict[int, list[dict[str, dict[str, int]]]], commits: list[int]
) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, sources in batches.items():
        lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}})]
        lines += [json.dumps(src) for src in sources]
        (root / "offsets" / str(batch)).write_text("\n".join(lines))
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (root / "offsets" / ".0.crc").write_text("x")  # Spark's checksum files are skipped
    return root


def test_committed_offsets_come_from_the_newest_committed_batch(tmp_path: Path) -> None:
    ckpt = _checkpoint(
        tmp_path / "q",
        {
            0: [{"iot.telemetry": {"0": 5, "1": 7}}],
            1: [{"iot.telemetry": {"0": 9, "1": 7}}, {"iot.presence": {"0": 2}}],
            2: [{"iot.telemetry": {"0": 20, "1": 20}}],  # planned, not committed yet
        },
        commits=[0, 1],
    )
    assert committed_offsets(ckpt) == {"iot.telemetry": {"0": 9, "1": 7}, "iot.presence": {"0": 2}}


def test_no_checkpoint_or_no_commit_is_unknown(tmp_path: Path) -> None:
    assert committed_offsets(tmp_path / "missing") is None
    assert committed_offsets(_checkpoint(tmp_path / "q", {0: [{"t": {"0": 1}}]}, [])) is None


def test_backlog_counts_records_past_the_checkpoint() -> None:
    committed = {"t": {"0": 10, "1": 5}}
    assert backlog(committed, {"t": {"0": 12, "1": 5}}) == 2
    assert backlog(committed, {"t": {"0": 10, "1": 5, "2": 3}}) == 3  # a new partition
    assert backlog(committed, {"other": {"0": 1}}) is None
    assert backlog(None, {"t": {"0": 1}}) is None


def test_restart_backoff_doubles_and_a_stable_run_starts_over() -> None:
    q = QueryHealth("device_minute")
    q.started(now=0)
    assert q.failed("STREAM_FAILED", now=1, settings=SETTINGS) == 2
    q.started(now=3)
    assert q.failed("STREAM_FAILED", now=4, settings=SETTINGS) == 4
    q.started(now=8)
    assert q.failed("STREAM_FAILED", now=9, settings=SETTINGS) == 8
    assert [q.active, q.last_error, q.next_start_at] == [False, "STREAM_FAILED", 17]
    q.started(now=17)
    assert q.failed("again", now=17 + 100, settings=SETTINGS) == 2  # it ran 100 s


def test_stalled_only_while_kafka_has_data_and_nothing_is_committed() -> None:
    q = QueryHealth("fleet_minute")
    q.started(now=0)
    q.observe({"t": {"0": 10}}, {"t": {"0": 10}}, now=10, stall_s=30)
    q.observe({"t": {"0": 10}}, {"t": {"0": 10}}, now=100, stall_s=30)
    assert not q.stalled  # idle: nothing waiting in Kafka
    q.observe({"t": {"0": 10}}, {"t": {"0": 50}}, now=110, stall_s=30)
    assert q.stalled  # 40 records waiting, and the checkpoint has not moved since t=10
    assert q.backlog == 40
    q.observe({"t": {"0": 30}}, {"t": {"0": 60}}, now=120, stall_s=30)
    assert not q.stalled  # it committed a batch
    q.observe({"t": {"0": 30}}, None, now=200, stall_s=30)
    assert not q.stalled  # Kafka away: nothing to read, nothing owed


def test_a_query_that_never_committed_stalls_when_kafka_has_data() -> None:
    q = QueryHealth("rejects")
    q.started(now=0)
    q.observe(None, {"t": {"0": 0}}, now=60, stall_s=30)
    assert not q.stalled
    q.observe(None, {"t": {"0": 5}}, now=61, stall_s=30)
    assert q.stalled


def test_job_ready_and_problems() -> None:
    job = JobHealth(running=True)
    job.query("a").started(now=0)
    job.query("b").started(now=0)
    assert job.ready
    job.query("b").failed("STREAM_FAILED: Timeout", now=1, settings=SETTINGS)
    job.query("a").stalled = True
    job.query("a").backlog = 7
    assert not job.ready
    assert job.problems() == [
        "a: stalled, 7 records waiting in Kafka",
        "b: restarting after STREAM_FAILED: Timeout",
    ]


def test_settings_from_environment() -> None:
    s = HealthSettings.from_env(
        {"IOT_ANALYTICS_HTTP_PORT": "9102", "IOT_ANALYTICS_STALL_AFTER": "45"}
    )
    assert (s.http_port, s.stall_after_s, s.restart_initial_s) == (9102, 45.0, 2.0)
    assert HealthSettings.from_env({}).http_port is None  # no endpoint unless asked for
    with pytest.raises(ConfigError, match="not a number"):
        HealthSettings.from_env({"IOT_ANALYTICS_STALL_AFTER": "soon"})
    with pytest.raises(ConfigError):
        HealthSettings(restart_initial_s=10, restart_max_s=5)


def test_a_cluster_job_without_executors_is_not_ready() -> None:
    """The silent hang: with its only worker gone a query stays active and never fails."""
    job = JobHealth(running=True, spark_master="spark://127.0.0.1:7077")
    job.query("a").started(now=0)
    assert job.observe_executors(None, now=1) is False  # local mode: no executors of its own
    assert job.ready
    assert job.observe_executors(2, now=2) is False
    assert job.ready
    assert job.observe_executors(0, now=3) is True  # the last worker died
    assert job.executors_lost_at == 3
    assert not job.ready
    assert job.query("a").active  # nothing failed: only the executor count tells
    assert job.problems() == [
        "no executors on spark://127.0.0.1:7077: no live Spark worker has the cores and memory "
        "this job asks for; its queries wait (they do not fail) until one does"
    ]
    assert job.observe_executors(0, now=13) is False  # still none: no new event
    assert job.executors_lost_at == 3
    assert job.observe_executors(1, now=20) is True  # a worker is back
    assert job.ready
    assert job.executors_lost_at is None
