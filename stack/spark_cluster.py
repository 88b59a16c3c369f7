"""A Spark standalone cluster from the pip wheel: one master and N workers as local processes.

The wheel has no `sbin/start-master.sh`, and `bin/spark-class` is a shell script that first runs
a Java launcher and then `exec`s the JVM, so the process's argv changes after the pid file is
written (the launcher checks argv against /proc to never signal a reused pid). We run the very
command `spark-class` builds (`SPARK_PRINT_LAUNCH_COMMAND=1` shows it): java, a heap, the conf
dir and the wheel's jars on the classpath, the daemon's main class.

The master runs with FILESYSTEM recovery (its state under `<data-dir>/spark/recovery`), so a
restarted master knows the running application and the workers again instead of letting them
kill its executors. Heaps, cores and memory are explicit: a JVM without -Xmx takes a quarter of
the machine's RAM, a worker offers every core and all RAM but 1 GiB by default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stack.config import StackConfig
from stack.errors import StackError
from stack.process import ManagedProcess

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_PREFIX = "spark-worker-"


def spark_home() -> Path:
    """The pyspark package folder: the wheel's `jars/` and `bin/` (`SPARK_HOME` wins)."""
    env = os.environ.get("SPARK_HOME")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise StackError("pyspark is not installed: the Spark cluster runs from its wheel")
    return Path(spec.origin).parent


def scala_version() -> str:
    """The Scala version the wheel's jars are built for (2.13 from spark-core_2.13-4.0.0.jar)."""
    for jar in (spark_home() / "jars").glob("spark-core_*.jar"):
        found = re.match(r"spark-core_(\d+\.\d+)-", jar.name)
        if found:
            return found.group(1)
    raise StackError(f"no spark-core jar in {spark_home() / 'jars'}")


def spark_conf_dir() -> Path:
    """Our log4j2.properties (warnings only), the one the analytics job uses too."""
    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or spec.origin is None:
        raise StackError("spark_jobs is not importable")
    return Path(spec.origin).parent / "conf"


def master_json(host: str, ui_port: int, timeout: float = 2.0) -> dict[str, Any] | None:
    """The master's `/json/` (status, workers, apps), or None when it does not answer."""
    try:
        url = f"http://{host}:{ui_port}/json/"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            found = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def alive_worker_ui_ports(state: dict[str, Any] | None) -> set[int]:
    """UI ports of the workers the master lists as ALIVE (a worker is known by its UI port)."""
    ports: set[int] = set()
    for worker in (state or {}).get("workers") or []:
        address = str(worker.get("webuiaddress", ""))
        if worker.get("state") == "ALIVE" and address.rsplit(":", 1)[-1].isdigit():
            ports.add(int(address.rsplit(":", 1)[-1]))
    return ports


class _SparkDaemon:
    """What master and worker share: the JVM command line and the process."""

    name: str
    main_class: str

    def __init__(self, config: StackConfig, name: str) -> None:
        self.config = config
        self.name = name
        self.process = ManagedProcess(name, config.run_dir, config.log_dir / f"{name}.log")

    def java_options(self) -> list[str]:
        return []

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise StackError("java not found: install OpenJDK 17 or newer (`make setup` checks)")
        jars = spark_home() / "jars"
        slf4j = sorted(jars.glob("slf4j-api-*.jar"))  # first, as spark-class puts it
        classpath = ":".join([str(spark_conf_dir()), *map(str, slf4j), f"{jars}/*"])
        return [
            java,
            f"-Xmx{self.config.spark_daemon_memory}",
            "-Djava.awt.headless=true",
            *self.java_options(),
            *shlex.split(self.config.spark_daemon_jvm_options),  # the operator's, last
            "-cp",
            classpath,
            self.main_class,
            *self.arguments(),
        ]

    def env(self) -> dict[str, str]:
        """The worker hands its environment to the executors it launches (and they to Python).

        A worker builds each executor's command with Spark's launcher library, which needs
        what `bin/load-spark-env.sh` exports: SPARK_HOME and SPARK_SCALA_VERSION.
        """
        return dict(os.environ) | {
            "SPARK_HOME": str(spark_home()),
            "SPARK_SCALA_VERSION": scala_version(),
            "SPARK_CONF_DIR": str(spark_conf_dir()),
            "SPARK_LOCAL_IP": self.config.connect_host,
        }

    def stop(self, timeout: float = 30.0) -> bool:
        return self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def running(self) -> bool:
        return self.process.running()


class SparkMaster(_SparkDaemon):
    main_class = MASTER_CLASS

    def __init__(self, config: StackConfig) -> None:
        super().__init__(config, "spark-master")
        self.recovery_dir = config.spark_dir / "recovery"

    @property
    def url(self) -> str:
        return f"spark://{self.config.connect_host}:{self.config.spark_master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.config.connect_host}:{self.config.spark_master_ui_port}"

    @property
    def endpoint(self) -> str:
        return f"{self.url} ui {self.ui_url}"

    def java_options(self) -> list[str]:
        return [
            "-Dspark.deploy.recoveryMode=FILESYSTEM",
            f"-Dspark.deploy.recoveryDirectory={self.recovery_dir}",
        ]

    def arguments(self) -> list[str]:
        cfg = self.config
        return [
            "--host", cfg.connect_host,
            "--port", str(cfg.spark_master_port),
            "--webui-port", str(cfg.spark_master_ui_port),
        ]  # fmt: skip

    def state(self) -> dict[str, Any] | None:
        return master_json(self.config.connect_host, self.config.spark_master_ui_port)

    def start(self) -> None:
        self.recovery_dir.mkdir(parents=True, exist_ok=True)
        self.process.start(self.command(), env=self.env(), cwd=self.config.spark_dir)

        def alive() -> bool:
            # RECOVERING first when the recovery dir holds an earlier master's state
            state = self.state()
            return state is not None and state.get("status") == "ALIVE"

        self.process.wait_ready(alive, self.config.start_timeout, f"{self.ui_url}/json/ ALIVE")


class SparkWorker(_SparkDaemon):
    main_class = WORKER_CLASS

    def __init__(self, config: StackConfig, number: int) -> None:
        super().__init__(config, f"{WORKER_PREFIX}{number}")
        self.number = number
        self.master = SparkMaster(config)
        self.work_dir = config.spark_dir / f"worker-{number}"

    @property
    def ui_port(self) -> int:
        return self.config.spark_worker_ui_port + self.number - 1

    @property
    def endpoint(self) -> str:
        cfg = self.config
        return (
            f"{cfg.spark_worker_cores} cores, {cfg.spark_worker_memory} "
            f"ui http://{cfg.connect_host}:{self.ui_port}"
        )

    def java_options(self) -> list[str]:
        # an application's folder (its jars, executor logs) goes a day after it ended
        return ["-Dspark.worker.cleanup.enabled=true", "-Dspark.worker.cleanup.appDataTtl=86400"]

    def arguments(self) -> list[str]:
        cfg = self.config
        return [
            "--host", cfg.connect_host,
            "--webui-port", str(self.ui_port),
            "--cores", str(cfg.spark_worker_cores),
            "--memory", cfg.spark_worker_memory,
            "--work-dir", str(self.work_dir),
            self.master.url,
        ]  # fmt: skip

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.process.start(self.command(), env=self.env(), cwd=self.config.spark_dir)
        self.process.wait_ready(
            lambda: self.ui_port in alive_worker_ui_ports(self.master.state()),
            self.config.start_timeout,
            f"registered with {self.master.url} (ALIVE in {self.master.ui_url}/json/)",
        )


def worker_numbers(config: StackConfig, recorded: Iterable[str] = ()) -> list[int]:
    """Workers to know of: those configured, those the last `up` recorded (`recorded`: its
    service names), and any that left a pid file."""
    names = [*recorded, *(p.stem for p in config.run_dir.glob(f"{WORKER_PREFIX}*.pid"))]
    found = set(range(1, config.spark_workers + 1))
    for name in names:
        suffix = name[len(WORKER_PREFIX) :] if name.startswith(WORKER_PREFIX) else ""
        if suffix.isdigit():
            found.add(int(suffix))
    return sorted(found)


def analytics_env(config: StackConfig) -> dict[str, str]:
    """The analytics job's Spark settings (IOT_SPARK_*) for the master `up` gives it, and the
    JVM options of its driver and executors when set (a service gets no IOT_* of `up`'s own)."""
    env = {
        name: value
        for name, value in (
            ("IOT_SPARK_DRIVER_JAVA_OPTIONS", config.connect_jvm_options),
            ("IOT_SPARK_EXECUTOR_JAVA_OPTIONS", config.spark_executor_jvm_options),
        )
        if value
    }
    master = config.analytics_master
    if not master:
        return env
    env["IOT_SPARK_MASTER"] = master
    if master.startswith("spark://"):
        env |= {
            "IOT_SPARK_EXECUTOR_CORES": "1",
            "IOT_SPARK_EXECUTOR_MEMORY": config.spark_executor_memory,
            "IOT_SPARK_DRIVER_MEMORY": "512m",
            "IOT_SPARK_UI_PORT": str(config.spark_app_ui_port),
        }
    if config.spark_workers:
        env |= {
            # one 1-core executor per worker; each worker's other cores stay free for a
            # report or a SQL query (an application without spark.cores.max takes every
            # free core of the cluster, and the next one would wait for it)
            "IOT_SPARK_CORES_MAX": str(config.spark_workers),
            # executors on this machine reach the driver on the stack's address
            "IOT_SPARK_DRIVER_HOST": config.connect_host,
        }
    return env


_INFO_RE = re.compile(r"^iot_analytics_spark_info\{(?P<labels>[^}]*)\}\s+1(\.0)?$", re.MULTILINE)
_EXECUTORS_RE = re.compile(r"^iot_analytics_executors\s+(-?\d+)(\.0)?$", re.MULTILINE)


def cluster_summary(state: dict[str, Any] | None) -> str:
    """The master's view in a few words: live workers, running applications and their cores."""
    if state is None:
        return "(its UI does not answer)"
    workers = state.get("workers") or []
    alive = len(alive_worker_ui_ports(state))
    apps = [
        f"{app.get('name')} {app.get('cores')} cores"
        for app in state.get("activeapps") or []
        if app.get("state") == "RUNNING"
    ]
    text = f"{str(state.get('status', '?')).lower()}, {alive}/{len(workers)} workers alive"
    return f"{text}, apps: {'; '.join(apps)}" if apps else f"{text}, no app"


def analytics_summary(metrics_text: str) -> str:
    """The analytics job's Spark UI and executor count, from its /metrics ('' if not there)."""
    parts = []
    info = _INFO_RE.search(metrics_text)
    if info:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', info.group("labels")))
        if labels.get("ui"):
            parts.append(f"spark ui {labels['ui']}")
    executors = _EXECUTORS_RE.search(metrics_text)
    if executors and int(executors.group(1)) >= 0:
        parts.append(f"{executors.group(1)} executors")
    return ", ".join(parts)


def live_endpoint(name: str, endpoint: str, config: StackConfig) -> str:
    """`status`'s endpoint column, with what the Spark master and the job say now."""
    if name == "spark-master":
        return f"{endpoint} ({cluster_summary(SparkMaster(config).state())})"
    if name == "analytics" and " on spark://" in endpoint:
        url = endpoint.split(maxsplit=1)[0]
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
                live = analytics_summary(response.read().decode())
        except (urllib.error.URLError, OSError, ValueError):
            return endpoint
        return f"{endpoint.split(' ui ', maxsplit=1)[0]} {live}" if live else endpoint
    return endpoint
