"""The streaming job across a Kafka outage (issue 17): Kafka stopped 60 s under load.

The job runs continuously (not available-now) against a private Kafka; records are produced
before, during (buffered by the producer) and after the outage. Nobody restarts the job: it
must carry on (restarting failed queries from their checkpoints by itself), be ready again on
its health endpoint, and its device_minute table must count every record sent exactly once.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_jobs import stream
from spark_jobs.config import AnalyticsConfig
from spark_jobs.query_health import HealthSettings
from stack.launcher import Stack
from stack.ports import free_port
from tests.spark_jobs.test_kafka_e2e import DEVICES, STEP_S, _clock, _minute_counts, _telemetry

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 60.0
# One wall-clock second carries a minute of event time, and after the outage the producer
# flushes its buffer partition by partition: a watermark far longer than the whole run means
# no record is ever late, whatever order the partitions catch up in.
WATERMARK_MINUTES = 600
RECORDS_PER_MINUTE = len(DEVICES) * 60 // STEP_S  # what the load sends every second


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"not within {timeout:.0f} s: {what}"
        time.sleep(1)
    return time.monotonic() - started


class Load:
    """One minute of telemetry (3 devices x 12 records) per wall-clock second, in a thread."""

    def __init__(self, bootstrap: str, topic: str, base_ms: int) -> None:
        from confluent_kafka import Producer

        # idempotent, and patient enough to wait out the outage with its buffer
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "message.timeout.ms": 300_000,
                "partitioner": "murmur2_random",
            }
        )
        self.topic = topic
        self.base_ms = base_ms
        self.sent: Counter[tuple[str, int]] = Counter()
        self.produced = 0
        self.delivered = 0  # acknowledged by Kafka (counted in the thread that polls)
        self.errors: list[str] = []
        self.minute = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _send(self, records: list[tuple[str | None, bytes, int]]) -> None:
        for key, value, received_at in records:
            self.producer.produce(
                self.topic,
                key=key.encode() if key is not None else None,
                value=value,
                headers=[("received_at", str(received_at).encode()), ("qos", b"1")],
                on_delivery=self._delivered,
            )
            self.produced += 1
        self.producer.poll(0)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err:
            self.errors.append(str(err))
        else:
            self.delivered += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            records, sent = _telemetry(
                self.base_ms, range(self.minute, self.minute + 1), set(), set()
            )
            self._send(records)
            self.sent += sent
            self.minute += 1
            self.stop.wait(1.0)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        # far ahead: the watermark (WATERMARK behind it) closes every minute sent
        self._send([_clock(self.base_ms, self.minute + WATERMARK_MINUTES + 10)])
        assert self.producer.flush(180) == 0
        assert self.errors == []


def test_job_recovers_from_a_kafka_outage_and_counts_every_record_once(
    spark: Any, local_stack_factory: Callable[..., Stack], tmp_path: Path
) -> None:
    local = local_stack_factory(partitions=3)
    warehouse = tmp_path / "warehouse"
    cfg = AnalyticsConfig.load(
        env={},
        kafka_bootstrap=local.kafka_bootstrap,
        warehouse_dir=warehouse,
        spark_master="local[2]",
        shuffle_partitions=2,
        watermark=f"{WATERMARK_MINUTES} minutes",
        trigger_interval="2 seconds",
        tables=("device_minute",),  # the one table it reads: the others only add CPU
    )
    port = free_port()
    health = HealthSettings(
        http_port=port, restart_initial_s=2, restart_max_s=10, check_interval_s=2
    )
    base = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    result: list[int] = []
    job = threading.Thread(
        target=lambda: result.append(stream.run(cfg, spark=spark, stop=stop, health=health)),
        daemon=True,
    )
    now_ms = int(time.time() * 1000)
    load = Load(local.kafka_bootstrap, cfg.topic_telemetry, (now_ms // 60_000 - 2000) * 60_000)

    def counts() -> dict[tuple[str, int], int]:
        try:
            return _minute_counts(warehouse, load.base_ms)  # no (device, minute) twice
        except Exception:  # noqa: BLE001 - the table may not exist yet
            return {}

    job.start()
    try:
        _wait(lambda: _get(f"{base}/readyz")[0] == 200, 180, "the job ready")
        load.thread.start()
        _wait(lambda: bool(counts()), 120, "device_minute counts the load before the outage")

        local.kafka.stop()  # SIGTERM: a clean broker shutdown, then 60 s without Kafka
        outage_started = time.monotonic()
        time.sleep(OUTAGE_S)
        down_for = time.monotonic() - outage_started
        assert job.is_alive(), "the job died during the outage"
        local.kafka.start()
        # the load goes on after the outage until Kafka acknowledged as many records as were
        # sent by its return (the buffer) and 3 minutes more
        after = load.produced + 3 * RECORDS_PER_MINUTE
        delivering = _wait(lambda: load.delivered >= after, 120, "the producer delivering again")
        load.finish()

        recovered = _wait(lambda: _get(f"{base}/readyz")[0] == 200, 240, "ready again")
        expected = dict(load.sent)

        caught_up = _wait(lambda: counts() == expected, 300, "device_minute counts every record")
        metrics = {
            (s.name, s.labels.get("query", "")): s.value
            for f in text_string_to_metric_families(_get(f"{base}/metrics")[1])
            for s in f.samples
        }
        restarts = {q: v for (n, q), v in metrics.items() if n == "iot_analytics_query_restarts"}
        print(
            f"Kafka down {down_for:.0f} s, its buffer and 3 minutes more in {delivering:.0f} s "
            f"after; {sum(expected.values())} records over "
            f"{load.minute} minutes; ready {recovered:.0f} s after the load's buffer was in; "
            f"counts complete {caught_up:.0f} s later; query restarts {restarts}"
        )
        assert job.is_alive()
        # _minute_counts asserts no (device, minute) twice; the counts equal what was sent
        assert sum(_minute_counts(warehouse, load.base_ms).values()) == sum(expected.values())
    finally:
        stop.set()
        job.join(120)
    assert result == [0]
