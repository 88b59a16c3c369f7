"""`iot-stack up --spark-workers 2` with the real processes (issue 17, item 3).

The master and both workers run under the supervisor: `status` lists them with the master's
URL and web UI and what the master says (workers alive); a worker and then the master killed
with `kill -9` are back within their backoff, the worker registered again, and the master
(FILESYSTEM recovery) with both workers ALIVE again; `down` stops the workers before the
master and the master before Kafka, and leaves no process behind (executors included).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from stack.ports import free_port, free_ports
from stack.spark_cluster import alive_worker_ui_ports, master_json
from tests.plugins.jvm_options import environ_without_settings, spark_daemon_java_options
from tests.stack.test_supervisor_integration import (
    _alive,
    _cli,
    _pid,
    _processes_of,
    _status,
    _wait,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _worker_ui_base() -> int:
    """A free port whose successor is free too (worker 2's UI is worker 1's + 1)."""
    from tests.spark_jobs.test_stream_cluster import _two_free_ports_in_a_row

    return _two_free_ports_in_a_row()


def test_up_spark_workers_supervised_status_and_down(tmp_path: Path) -> None:
    mqtt, kafka, controller, master_port, master_ui = free_ports(5)
    worker_ui = _worker_ui_base()
    data_dir = (tmp_path / "var").resolve()
    args = [
        "--data-dir", str(data_dir),
        "--mqtt-port", str(mqtt),
        "--mqtt-tls-port", str(free_port()),
        "--kafka-port", str(kafka),
        "--kafka-controller-port", str(controller),
    ]  # fmt: skip
    env = environ_without_settings() | {
        "IOT_STACK_RESTART_BACKOFF_INITIAL": "1",
        "IOT_STACK_RESTART_BACKOFF_MAX": "8",
        "IOT_KAFKA_HEAP": "512m",
        "IOT_STACK_INSECURE_ANONYMOUS": "1",  # no registry needed: no bridge, no devices
        "IOT_START_TIMEOUT": "300",  # per server, on a shared 2-core box
        "IOT_STACK_SPARK_MASTER_PORT": str(master_port),
        "IOT_STACK_SPARK_MASTER_UI_PORT": str(master_ui),
        "IOT_STACK_SPARK_WORKER_UI_PORT": str(worker_ui),
    }
    workers_alive = lambda: alive_worker_ui_ports(master_json("127.0.0.1", master_ui))  # noqa: E731
    up = _cli(
        ["up", *args, "--no-bridge", "--no-api", "--spark-workers", "2",
         "--spark-worker-cores", "1", "--spark-worker-memory", "768m"],
        env, timeout=900,
    )  # fmt: skip
    seen: dict[str, int | None] = {}
    try:
        assert up.returncode == 0, up.stderr
        assert "spark-master" in up.stdout
        status = _status(args, env)
        assert list(status) == [
            "supervisor", "mosquitto", "kafka", "spark-master", "spark-worker-1", "spark-worker-2",
        ]  # fmt: skip
        master_line = status["spark-master"]
        assert f"spark://127.0.0.1:{master_port} ui http://127.0.0.1:{master_ui}" in master_line
        assert "2/2 workers alive" in master_line, master_line
        assert f"1 cores, 768m ui http://127.0.0.1:{worker_ui + 1}" in status["spark-worker-2"]
        assert workers_alive() == {worker_ui, worker_ui + 1}
        seen = {name: _pid(line) for name, line in status.items()}
        # the daemons run the test run's JVM options, which `up` read from its environment
        for name in ("spark-master", "spark-worker-1", "spark-worker-2"):
            argv = Path(f"/proc/{seen[name]}/cmdline").read_bytes().decode().split("\0")
            assert set(spark_daemon_java_options().split()) <= set(argv), (name, argv)

        for name in ("spark-worker-1", "spark-master"):
            old = _pid(_status(args, env)[name])
            assert old is not None
            os.kill(old, signal.SIGKILL)
            back = _wait(
                lambda n=name, o=old: _pid(_status(args, env)[n]) not in (None, o),  # type: ignore[misc]
                30,
                f"{name} restarted",
            )
            line = _status(args, env)[name]
            assert "restarts 1 (last: killed by SIGKILL)" in line, line
            # the worker registers again; the restarted master recovers both workers
            ready = _wait(
                lambda: workers_alive() == {worker_ui, worker_ui + 1}, 300, "2 workers ALIVE"
            )
            print(
                f"{name}: new pid {back:.1f} s after kill -9, 2 workers ALIVE {ready:.1f} s later"
            )
            seen[f"{name}-2"] = _pid(line)
        recovery = data_dir / "spark" / "recovery"
        assert any(recovery.iterdir()), "the master keeps its state for recovery"
    finally:
        down = _cli(["down", *args], env)
    assert down.returncode == 0, down.stderr
    order = [line.split()[1] for line in down.stderr.splitlines() if line.startswith("stopping ")]
    assert order == [
        "spark-worker-2", "spark-worker-1", "spark-master", "kafka", "mosquitto", "supervisor",
    ]  # fmt: skip
    _wait(lambda: not _processes_of(data_dir), 20, f"every process gone: {_processes_of(data_dir)}")
    for name, pid in seen.items():
        assert pid is None or not _alive(pid), f"{name} (pid {pid}) still runs"
