"""The Spark cluster `up --spark-workers N` starts: command lines, environment, order, status
(no process is started here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stack.cli import _config, _parser
from stack.config import StackConfig
from stack.errors import StackError
from stack.launcher import Stack
from stack.spark_cluster import (
    MASTER_CLASS,
    WORKER_CLASS,
    SparkMaster,
    SparkWorker,
    alive_worker_ui_ports,
    analytics_env,
    analytics_summary,
    cluster_summary,
    spark_home,
    worker_numbers,
)


def _config_with(tmp_path: Path, **changes: object) -> StackConfig:
    return StackConfig(data_dir=tmp_path, **changes)  # type: ignore[arg-type]


def test_master_runs_the_jvm_spark_class_would_with_filesystem_recovery(tmp_path: Path) -> None:
    cfg = _config_with(tmp_path, spark_workers=2, spark_daemon_memory="256m")
    master = SparkMaster(cfg)
    argv = master.command()
    jars = spark_home() / "jars"
    assert Path(argv[0]).name == "java"
    assert argv[1:5] == [
        "-Xmx256m",
        "-Djava.awt.headless=true",
        "-Dspark.deploy.recoveryMode=FILESYSTEM",
        f"-Dspark.deploy.recoveryDirectory={tmp_path / 'spark' / 'recovery'}",
    ]
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert classpath[0].endswith("spark_jobs/conf")  # our log4j2.properties: warnings only
    assert re.fullmatch(rf"{jars}/slf4j-api-[\d.]+\.jar", classpath[1])
    assert classpath[-1] == f"{jars}/*"
    assert argv[argv.index("-cp") + 2 :] == [
        MASTER_CLASS, "--host", "127.0.0.1", "--port", "7077", "--webui-port", "8080",
    ]  # fmt: skip
    assert master.url == "spark://127.0.0.1:7077"
    assert master.endpoint == "spark://127.0.0.1:7077 ui http://127.0.0.1:8080"


def test_workers_offer_explicit_cores_and_memory_and_have_ui_ports_in_a_row(
    tmp_path: Path,
) -> None:
    cfg = _config_with(
        tmp_path, spark_workers=3, spark_worker_cores=1, spark_worker_memory="768m",
        spark_master_port=17077, spark_worker_ui_port=18081,
    )  # fmt: skip
    workers = [SparkWorker(cfg, n) for n in (1, 2, 3)]
    assert [w.ui_port for w in workers] == [18081, 18082, 18083]
    argv = workers[1].command()
    assert "-Xmx256m" in argv
    assert "-Dspark.worker.cleanup.enabled=true" in argv
    assert argv[argv.index(WORKER_CLASS) + 1 :] == [
        "--host", "127.0.0.1", "--webui-port", "18082", "--cores", "1", "--memory", "768m",
        "--work-dir", str(tmp_path / "spark" / "worker-2"), "spark://127.0.0.1:17077",
    ]  # fmt: skip
    env = workers[0].env()
    # what bin/load-spark-env.sh exports: the worker's launcher library needs both to build
    # an executor's command line
    assert env["SPARK_HOME"] == str(spark_home())
    assert env["SPARK_SCALA_VERSION"] == "2.13"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_CONF_DIR"].endswith("spark_jobs/conf")


def test_daemon_jvm_options_come_after_the_daemons_own_and_before_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "-XX:TieredStopAtLevel=1" not in SparkMaster(_config_with(tmp_path)).command()
    monkeypatch.setenv("IOT_STACK_SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1  -Dx='a b'")
    cfg = StackConfig.from_env(data_dir=tmp_path, spark_workers=1)
    assert cfg.spark_daemon_jvm_options == "-XX:TieredStopAtLevel=1  -Dx='a b'"
    for daemon, own in (
        (SparkMaster(cfg), "-Dspark.deploy.recoveryMode=FILESYSTEM"),
        (SparkWorker(cfg, 1), "-Dspark.worker.cleanup.enabled=true"),
    ):
        argv = daemon.command()
        at = argv.index("-XX:TieredStopAtLevel=1")
        assert argv[at : at + 3] == ["-XX:TieredStopAtLevel=1", "-Dx=a b", "-cp"]
        assert argv.index(own) < at


def test_the_job_gets_its_driver_and_executor_jvm_options_from_up(tmp_path: Path) -> None:
    cfg = _config_with(
        tmp_path, spark_workers=2, with_analytics=True,
        connect_jvm_options="-XX:TieredStopAtLevel=1",
        spark_executor_jvm_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )  # fmt: skip
    env = Stack(cfg).analytics().env
    assert env["IOT_SPARK_DRIVER_JAVA_OPTIONS"] == "-XX:TieredStopAtLevel=1"
    assert env["IOT_SPARK_EXECUTOR_JAVA_OPTIONS"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    # local mode too (the driver's options; the executors' are ignored there)
    local = _config_with(tmp_path, connect_jvm_options="-Xss2m")
    assert analytics_env(local) == {"IOT_SPARK_DRIVER_JAVA_OPTIONS": "-Xss2m"}


def test_up_reads_the_executor_jvm_options_from_the_jobs_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IOT_SPARK_EXECUTOR_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
    cfg = _config(_parser().parse_args(["up", "--analytics", "--spark-workers", "1"]))
    assert cfg.spark_executor_jvm_options == "-XX:TieredStopAtLevel=1"
    assert analytics_env(cfg)["IOT_SPARK_EXECUTOR_JAVA_OPTIONS"] == "-XX:TieredStopAtLevel=1"


def test_up_starts_master_then_workers_after_kafka_and_the_job_runs_on_them(
    tmp_path: Path,
) -> None:
    stack = Stack(_config_with(tmp_path, spark_workers=2, with_analytics=True))
    names = [name for name, _ in stack.services()]
    assert names == [
        "mosquitto", "kafka", "spark-master", "spark-worker-1", "spark-worker-2",
        "bridge", "commands", "api", "analytics", "connect", "connect-tls",
    ]  # fmt: skip
    # supervised like the rest: the supervisor (re)starts them
    assert all(s.process.supervisor is stack.link for _, s in stack.services())
    job = stack.analytics()
    assert {k: v for k, v in job.env.items() if k.startswith("IOT_SPARK")} == {
        "IOT_SPARK_MASTER": "spark://127.0.0.1:7077",
        "IOT_SPARK_EXECUTOR_CORES": "1",
        "IOT_SPARK_EXECUTOR_MEMORY": "512m",
        "IOT_SPARK_DRIVER_MEMORY": "512m",
        "IOT_SPARK_UI_PORT": "4040",
        "IOT_SPARK_CORES_MAX": "2",  # one core per worker: the others stay free for reports
        "IOT_SPARK_DRIVER_HOST": "127.0.0.1",
    }
    assert job.endpoint == (
        "http://127.0.0.1:9102/metrics on spark://127.0.0.1:7077 ui http://127.0.0.1:4040"
    )
    endpoints = stack.endpoints()
    assert endpoints["spark-master"] == "spark://127.0.0.1:7077 ui http://127.0.0.1:8080"
    assert endpoints["spark-worker-2"] == "2 cores, 1g ui http://127.0.0.1:8082"


def test_down_and_status_find_workers_an_earlier_up_started(tmp_path: Path) -> None:
    cfg = _config_with(tmp_path)  # no --spark-workers given to `down`
    (cfg.run_dir).mkdir(parents=True)
    for n in (1, 3):
        (cfg.run_dir / f"spark-worker-{n}.pid").write_text("{}")
    assert worker_numbers(cfg) == [1, 3]
    known = [name for name, _ in Stack(cfg)._all_known()]
    assert known[:5] == ["mosquitto", "kafka", "spark-master", "spark-worker-1", "spark-worker-3"]
    # down stops in reverse: the analytics job before the workers, the master after them
    order = list(reversed(known))
    assert order.index("analytics") < order.index("spark-worker-1") < order.index("spark-master")
    assert order.index("spark-master") < order.index("kafka")


def test_no_cluster_by_default_and_an_external_master_is_passed_on(tmp_path: Path) -> None:
    assert analytics_env(_config_with(tmp_path)) == {}
    assert "IOT_SPARK_MASTER" not in Stack(_config_with(tmp_path)).analytics().env
    ext = _config_with(tmp_path, spark_master="spark://spark.example:7077")
    env = analytics_env(ext)
    assert env["IOT_SPARK_MASTER"] == "spark://spark.example:7077"
    assert "IOT_SPARK_CORES_MAX" not in env  # someone else's cluster: no cap guessed
    assert "IOT_SPARK_DRIVER_HOST" not in env  # loopback would be wrong there
    assert analytics_env(_config_with(tmp_path, spark_master="local[2]")) == {
        "IOT_SPARK_MASTER": "local[2]"
    }
    assert [n for n, _ in Stack(ext).services()][:3] == ["mosquitto", "kafka", "bridge"]


@pytest.mark.parametrize(
    "changes",
    [
        {"spark_workers": 2, "spark_master": "spark://elsewhere:7077"},
        {"spark_master": "yarn"},
        {"spark_workers": -1},
        {"spark_worker_cores": 0},
        {"spark_worker_memory": "lots"},
        {"spark_workers": 2, "spark_worker_ui_port": 65535},
        {"spark_workers": 3, "spark_master_ui_port": 8082},
    ],
)
def test_bad_spark_settings_are_rejected(changes: dict[str, object]) -> None:
    with pytest.raises(StackError):
        StackConfig(**changes)  # type: ignore[arg-type]


def test_up_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOT_STACK_SPARK_WORKER_MEMORY", "2g")
    args = _parser().parse_args(
        ["up", "--analytics", "--spark-workers", "2", "--spark-worker-cores", "1"]
    )
    cfg = _config(args)
    assert (cfg.spark_workers, cfg.spark_worker_cores, cfg.spark_worker_memory) == (2, 1, "2g")
    assert cfg.analytics_master == "spark://127.0.0.1:7077"
    cfg = _config(_parser().parse_args(["up", "--spark-master", "local[2]"]))
    assert (cfg.spark_workers, cfg.analytics_master) == (0, "local[2]")


MASTER_STATE = {
    "status": "ALIVE",
    "workers": [
        {"webuiaddress": "http://127.0.0.1:8081", "state": "ALIVE"},
        {"webuiaddress": "http://127.0.0.1:8082", "state": "DEAD"},
        {"webuiaddress": "http://127.0.0.1:8083", "state": "ALIVE"},
    ],
    "activeapps": [{"name": "iot-analytics-stream", "cores": 2, "state": "RUNNING"}],
}


def test_status_shows_the_masters_view_and_the_jobs_spark_ui() -> None:
    assert alive_worker_ui_ports(MASTER_STATE) == {8081, 8083}
    assert alive_worker_ui_ports(None) == set()
    assert cluster_summary(MASTER_STATE) == (
        "alive, 2/3 workers alive, apps: iot-analytics-stream 2 cores"
    )
    assert cluster_summary(None) == "(its UI does not answer)"
    metrics = (
        "# TYPE iot_analytics_executors gauge\n"
        "iot_analytics_executors 2.0\n"
        'iot_analytics_spark_info{master="spark://127.0.0.1:7077",ui="http://127.0.0.1:4041"} 1.0\n'
    )
    assert analytics_summary(metrics) == "spark ui http://127.0.0.1:4041, 2 executors"
    assert analytics_summary("iot_analytics_executors -1.0\n") == ""  # local mode


def test_status_lists_the_recorded_spark_services(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(
        json.dumps({"mqtt": "x", "kafka": "y", "spark-master": "m", "spark-worker-1": "w"})
    )
    names = [st.name for st in Stack(_config_with(tmp_path, supervise=False)).status()]
    assert names == ["mosquitto", "kafka", "spark-master", "spark-worker-1"]
