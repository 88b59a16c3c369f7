"""The streaming job killed with SIGKILL mid-batch and started again (issue 35).

The job runs as `iot-analytics stream` in a process group of its own, against the session's
Kafka, under the recovery test's load (a minute of telemetry per wall-clock second). It is
killed with SIGKILL while a batch of device_minute is planned in its checkpoint but not yet
committed, then started again on the same warehouse: the planned batch runs again, and its
MERGE (same query id, same batch id) must not count a reading twice. device_minute must end
with every (device, minute) once, with the counts sent.

The test reads the table with delta-rs, not the session's Spark: its Spark is the job's own JVM,
so it runs on any xdist worker, beside the `spark` group (tests/plugins/parallel.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.jvm_options import environ_without_settings
from tests.spark_jobs.test_kafka_e2e import _minute_counts
from tests.spark_jobs.test_stream_recovery import WATERMARK_MINUTES, Load, _wait

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _batches(folder: Path) -> int:
    """The newest batch id in a checkpoint's ``offsets`` or ``commits`` folder, -1: none."""
    try:
        return max((int(p.name) for p in folder.iterdir() if p.name.isdigit()), default=-1)
    except OSError:
        return -1


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # the job and its Spark JVM: one group to kill
        )  # fmt: skip


def _kill(job: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    job.wait(30)


@pytest.mark.timeout(1800)
def test_kill_9_of_the_job_mid_batch_then_restart_counts_every_minute_once(
    stack: Any, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    telemetry = topic_factory(prefix="kill-telemetry", partitions=3)
    presence = topic_factory(prefix="kill-presence", partitions=3, compacted=True)
    warehouse = tmp_path / "warehouse"
    checkpoint = warehouse / "_checkpoints" / "device_minute"
    env = environ_without_settings() | {
        "PYTHONPATH": str(ROOT),
        "IOT_SPARK_DRIVER_MEMORY": "512m",
        "IOT_SHUFFLE_PARTITIONS": "2",
        # the one table this test reads: the job's other four queries would only add CPU
        "IOT_TABLES": "device_minute",
    }
    argv = [
        sys.executable, "-m", "spark_jobs.cli", "stream",
        "--spark-master", "local[2]",
        "--kafka-bootstrap", stack.kafka_bootstrap,
        "--topic-telemetry", telemetry, "--topic-presence", presence,
        "--warehouse-dir", str(warehouse),
        "--trigger", "2 seconds",
        "--watermark", f"{WATERMARK_MINUTES} minutes",
    ]  # fmt: skip
    log = tmp_path / "stream.log"
    now_ms = int(time.time() * 1000)
    load = Load(stack.kafka_bootstrap, telemetry, (now_ms // 60_000 - 2000) * 60_000)
    job = _start(argv, env, log)
    try:
        load.thread.start()
        first = _wait(lambda: _batches(checkpoint / "commits") >= 1, 900, "a batch committed")

        def mid_batch() -> bool:  # planned (offsets written), not yet committed
            return _batches(checkpoint / "offsets") > _batches(checkpoint / "commits")

        started = time.monotonic()
        while not mid_batch():
            assert time.monotonic() - started < 300, "no batch in flight within 300 s"
            time.sleep(0.05)  # polling the checkpoint folder for the moment to kill in
        planned = _batches(checkpoint / "offsets")
        _kill(job)
        assert _batches(checkpoint / "commits") < planned, "the batch committed before the kill"
        job = _start(argv, env, log)
        load.finish()
        expected = dict(load.sent)

        def counted() -> bool:
            try:
                got = _minute_counts(warehouse, load.base_ms)  # no (device, minute) twice
            except Exception:  # noqa: BLE001 - a read while the table's first commit is written
                return False
            return got == expected

        caught_up = _wait(counted, 900, "device_minute counts every record sent, once")
        assert job.poll() is None, "the restarted job died"
        # the sink's Delta commit comes before the checkpoint's commit file of the same batch:
        # read through delta-rs, the counts can be whole a moment before that file is written
        _wait(
            lambda: _batches(checkpoint / "commits") >= planned, 120, "the killed batch committed"
        )
        assert _batches(checkpoint / "commits") >= planned
        assert sum(_minute_counts(warehouse, load.base_ms).values()) == sum(expected.values())
        print(
            f"batch 1 committed {first:.0f} s after the start; killed in batch {planned}; "
            f"every minute counted {caught_up:.0f} s after the restart"
        )
    finally:
        load.stop.set()
        _kill(job)
        print(log.read_text(errors="replace")[-3000:])
