"""The streaming job's health endpoint over HTTP, fed a JobHealth by hand."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from prometheus_client.parser import text_string_to_metric_families

from spark_jobs import delta_writes
from spark_jobs.health_http import HealthEndpoint
from spark_jobs.query_health import HealthSettings, JobHealth


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def test_health_ready_and_metrics_follow_the_job() -> None:
    job = JobHealth()
    endpoint = HealthEndpoint("127.0.0.1", 0, lambda: job)
    endpoint.start()
    base = f"http://127.0.0.1:{endpoint.port}"
    try:
        assert _get(f"{base}/healthz")[0] == 503  # the loop has not started
        job.running = True
        job.kafka_reachable = True
        job.query("device_minute").started(now=0)
        job.query("rejects").started(now=0)
        assert _get(f"{base}/healthz") == (200, "ok\n")
        assert _get(f"{base}/readyz") == (200, "ready\n")

        job.query("rejects").failed("STREAM_FAILED", now=1, settings=HealthSettings())
        job.query("rejects").restarts = 1
        job.query("device_minute").stalled = True
        job.query("device_minute").backlog = 12
        code, body = _get(f"{base}/readyz")
        assert code == 503
        assert "device_minute: stalled, 12 records waiting in Kafka" in body
        assert "rejects: restarting after STREAM_FAILED" in body
        assert _get(f"{base}/healthz")[0] == 200  # still alive: it recovers by itself

        samples = {
            (s.name, s.labels.get("query", "")): s.value
            for f in text_string_to_metric_families(_get(f"{base}/metrics")[1])
            for s in f.samples
        }
        assert samples[("iot_analytics_query_stalled", "device_minute")] == 1
        assert samples[("iot_analytics_query_backlog_records", "device_minute")] == 12
        assert samples[("iot_analytics_query_active", "rejects")] == 0
        assert samples[("iot_analytics_query_restarts", "rejects")] == 1
        assert samples[("iot_analytics_kafka_reachable", "")] == 1
        assert samples[("iot_analytics_ready", "")] == 0
        assert samples[("iot_analytics_executors", "")] == -1  # local mode

        job.spark_master, job.spark_ui = "spark://127.0.0.1:7077", "http://127.0.0.1:4040"
        job.query("rejects").started(now=2)
        job.query("device_minute").stalled = False
        job.observe_executors(0, now=3)
        code, body = _get(f"{base}/readyz")
        assert (code, body.split(":")[0]) == (503, "no executors on spark")
        text = _get(f"{base}/metrics")[1]
        info = [
            s for f in text_string_to_metric_families(text) for s in f.samples
            if s.name in ("iot_analytics_executors", "iot_analytics_spark_info")
        ]  # fmt: skip
        assert [(s.name, s.labels, s.value) for s in info] == [
            ("iot_analytics_executors", {}, 0),
            (
                "iot_analytics_spark_info",
                {"master": "spark://127.0.0.1:7077", "ui": "http://127.0.0.1:4040"},
                1,
            ),
        ]
    finally:
        endpoint.stop()


def test_metrics_count_each_tables_files_from_its_log(tmp_path: Path) -> None:
    for batch in (["a", "b"], ["c"]):  # two commits: two files
        write_deltalake(str(tmp_path / "device_minute"), pa.table({"d": batch}), mode="append")
    write_deltalake(str(tmp_path / "anomalies"), pa.table({"d": ["a"]}))
    write_deltalake(str(tmp_path / "anomalies"), pa.table({"d": ["z"]}), mode="overwrite")
    (tmp_path / "rejects" / "_delta_log").mkdir(parents=True)  # no commit yet: left out
    found = delta_writes.table_files(tmp_path)
    assert found == {
        "anomalies": delta_writes.TableFiles(live=1, today=1),  # the overwritten file is gone
        "device_minute": delta_writes.TableFiles(live=2, today=2),
    }
    tomorrow = time.time() + 86400
    assert delta_writes.table_files(tmp_path, now=tomorrow)["device_minute"].today == 0

    job = JobHealth()
    endpoint = HealthEndpoint(
        "127.0.0.1",
        0,
        lambda: job,
        table_files=lambda: delta_writes.table_files(tmp_path),
        max_files_per_day=1,
    )
    endpoint.start()
    try:
        text = _get(f"http://127.0.0.1:{endpoint.port}/metrics")[1]
    finally:
        endpoint.stop()
    samples = {
        (s.name, s.labels.get("table", "")): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("iot_analytics_table_files", "device_minute")] == 2
    assert samples[("iot_analytics_table_files_today", "anomalies")] == 1
    assert ("iot_analytics_table_files", "rejects") not in samples
    assert samples[("iot_analytics_table_files_over_bound", "device_minute")] == 1  # 2 > 1
    assert samples[("iot_analytics_table_files_over_bound", "anomalies")] == 0
