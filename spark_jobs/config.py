"""The analytics jobs' one configuration object.

Every setting is a field of :class:`AnalyticsConfig` with its default and help text. Its
environment variable is ``IOT_`` + the field name in upper case (``kafka_bootstrap`` ->
``IOT_KAFKA_BOOTSTRAP``, ``topic_telemetry`` -> ``IOT_TOPIC_TELEMETRY``: the same names as the
bridge's settings where they overlap). Precedence: defaults < environment < keyword overrides
(the CLI passes its flags as overrides). The object is frozen and validated on creation.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appconfig import kafka_security as _ks
from appconfig import settings as appsettings
from spark_jobs import retention
from spark_jobs.delta_conf import delta_conf
from spark_jobs.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
_JARS_SUBDIR = Path("kafka") / "spark-connector" / "libs"
DEFAULT_JARS_DIR = REPO_ROOT / _JARS_SUBDIR


def default_jars_dir(env: Mapping[str, str]) -> Path:
    """Where the connector jars are when ``IOT_SPARK_JARS_DIR`` does not say: under ``IOT_HOME``
    when it is set (an installed copy, the Docker image: as stack/paths.py reads it), else
    beside the package (a checkout)."""
    home = env.get("IOT_HOME")
    return Path(home) / _JARS_SUBDIR if home else DEFAULT_JARS_DIR


_DURATION_RE = re.compile(r"^\d+(\.\d+)?\s+(millisecond|second|minute|hour|day)s?$")
_METRIC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_STARTING = ("earliest", "latest")
# The masters this appliance runs on and tests: local mode, or Spark standalone (one master,
# or several for ZooKeeper HA: spark://h1:7077,h2:7077).
_LOCAL_MASTER_RE = re.compile(r"^local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?$")
_STANDALONE_MASTER_RE = re.compile(r"^spark://[\w.-]+:\d{1,5}(,[\w.-]+:\d{1,5})*$")
_JVM_SIZE_RE = re.compile(r"^[1-9]\d*[kmgt]?$", re.IGNORECASE)


def is_local_master(master: str) -> bool:
    return master.startswith("local")


def check_master(master: str) -> str:
    """``master`` if it is ``local``, ``local[N]``, ``local[*]`` or ``spark://host:port``."""
    if _LOCAL_MASTER_RE.match(master) or _STANDALONE_MASTER_RE.match(master):
        return master
    raise ConfigError(
        f"spark_master must be local, local[N], local[*] or spark://host:port: {master!r}"
    )


_setting = appsettings.setting
env_name = appsettings.env_name  # the environment variable of a setting


# the job's tables (spark_jobs.schemas.TABLES, which imports pyspark: a test keeps them equal)
TABLE_NAMES = ("device_minute", "fleet_minute", "anomalies", "device_status", "rejects")


@dataclass(frozen=True, slots=True)
class AnalyticsConfig:
    """All analytics settings. Build with :meth:`load` (defaults < ``IOT_*`` env < overrides)."""

    # --- Spark ------------------------------------------------------------------------------
    spark_master: str = _setting(
        "local[*]",
        "Spark master: local[N] / local[*] (in this process) or spark://host:port (a Spark "
        "standalone cluster, e.g. the one `iot-stack up --spark-workers N` starts).",
    )
    spark_driver_memory: str = _setting("1g", "Spark driver memory (spark.driver.memory).")
    spark_driver_java_options: str = _setting(
        "",
        "Extra JVM options of the Spark driver (spark.driver.extraJavaOptions); e.g. "
        "-XX:TieredStopAtLevel=1 halves a short job's CPU (the tests use it).",
    )
    spark_driver_host: str = _setting(
        "",
        "Address the executors reach the driver by (spark.driver.host; a cluster only). "
        "Empty: Spark's guess from the host name.",
    )
    spark_executor_memory: str = _setting(
        "512m", "Heap of each executor on a cluster (spark.executor.memory)."
    )
    spark_executor_java_options: str = _setting(
        "",
        "Extra JVM options of each executor on a cluster (spark.executor.extraJavaOptions); "
        "the tests use -XX:TieredStopAtLevel=1 as for the driver.",
    )
    spark_executor_cores: int = _setting(
        1, "Cores of each executor on a cluster (spark.executor.cores)."
    )
    spark_cores_max: int = _setting(
        0,
        "Cores this application takes from a cluster at most (spark.cores.max); 0: every "
        "free core, leaving none for a second application.",
    )
    spark_ui_port: int = _setting(
        0, "Port of this application's Spark UI (spark.ui.port); 0: no UI."
    )
    shuffle_partitions: int = _setting(
        2,
        "spark.sql.shuffle.partitions: also the number of state-store partitions of the "
        "streaming aggregations (fixed in the checkpoint once a query first ran).",
    )
    spark_jars_dir: Path = _setting(
        DEFAULT_JARS_DIR,
        "Folder with Spark's Kafka connector, Delta Lake and their runtime jars (passed as "
        "spark.jars); "
        "default $IOT_HOME/kafka/spark-connector/libs when IOT_HOME is set.",
    )
    # --- Kafka ------------------------------------------------------------------------------
    kafka_bootstrap: str = _setting("localhost:9092", "Kafka bootstrap servers.")
    # --- Kafka security (appconfig.kafka_security, docs/security.md): IOT_KAFKA_SECURITY_PROTOCOL,
    # IOT_KAFKA_SASL_MECHANISM, IOT_KAFKA_SASL_USERNAME, IOT_KAFKA_SASL_PASSWORD_FILE and
    # IOT_KAFKA_SSL_CA_FILE, read into the Spark Kafka source's kafka.* options
    kafka_security_protocol: str = _setting("", _ks.HELP["kafka_security_protocol"])
    kafka_sasl_mechanism: str = _setting("SCRAM-SHA-512", _ks.HELP["kafka_sasl_mechanism"])
    kafka_sasl_username: str = _setting("", _ks.HELP["kafka_sasl_username"])
    kafka_sasl_password_file: str = _setting("", _ks.HELP["kafka_sasl_password_file"])
    kafka_ssl_ca_file: str = _setting("", _ks.HELP["kafka_ssl_ca_file"])
    topic_telemetry: str = _setting("iot.telemetry", "Kafka topic with the telemetry records.")
    topic_presence: str = _setting("iot.presence", "Kafka topic with device presence records.")
    tenant_topics: bool = _setting(
        True,
        "Also read every tenant's copy of the telemetry and presence topics "
        "(iot.{tenant}.telemetry ..., by pattern); off: the two topics above only.",
    )
    starting_offsets: str = _setting(
        "earliest", "Where a query without a checkpoint starts: earliest or latest."
    )
    max_offsets_per_trigger: int = _setting(
        0, "Cap on Kafka records per micro-batch and query (0: no cap)."
    )
    fail_on_data_loss: bool = _setting(
        False,
        "Stop the query when Kafka no longer has offsets it expected (retention ran past it). "
        "Off: the job logs Kafka's warning and continues.",
    )
    # --- streaming --------------------------------------------------------------------------
    trigger_interval: str = _setting(
        "10 seconds", "Micro-batch trigger interval of the streaming queries."
    )
    watermark: str = _setting(
        "2 minutes",
        "Event-time watermark delay: a minute is written once the newest event time seen is "
        "this far past its end; records older than the watermark are dropped (and counted).",
    )
    warehouse_dir: Path = _setting(Path("var/warehouse"), "Folder of the Parquet tables.")
    checkpoint_dir: Path = _setting(
        Path(""), "Folder of the streaming checkpoints (default: <warehouse_dir>/_checkpoints)."
    )
    metrics: tuple[str, ...] = _setting(
        ("temperature", "humidity", "battery", "vibration"),
        "Metric names with their own columns in the tables (comma-separated in the env).",
    )
    tables: tuple[str, ...] = _setting(
        TABLE_NAMES,
        "The tables the job writes (comma-separated in the env; default all five); a table "
        "left out has no query, which saves its share of the job's CPU.",
    )
    delta_upkeep_interval_s: float = _setting(
        3600.0,
        "Seconds between two compactions (OPTIMIZE) and VACUUMs of each table, run by the job "
        "after one of the table's batches; 0: never.",
    )
    delta_retention_hours: int = _setting(
        168,
        "VACUUM deletes the files no table version younger than this many hours needs: the "
        "reach of time travel, and of a reader still on an older version.",
    )
    retention_days: tuple[str, ...] = _setting(
        retention.DEFAULT_DAYS,
        "Days of rows each table keeps, as table=days (comma-separated; 0 or a table left out: "
        "forever; device_status, a snapshot, is never aged). The upkeep DELETEs older rows.",
    )
    retention_tenants: tuple[str, ...] = _setting(
        (),
        "Per-tenant overrides of retention_days, as tenant:table=days (comma-separated, e.g. "
        "acme:device_minute=30,acme:rejects=0; 0: that tenant's rows forever).",
    )
    delta_max_files_per_day: int = _setting(
        200,
        "Bound on a table's data files written today (iot_analytics_table_files_today): past "
        "it the job compacts the table after its next batch, between upkeeps; 0: no bound.",
    )
    # --- anomalies --------------------------------------------------------------------------
    anomaly_history: int = _setting(
        60, "Readings per device and metric that form the device's recent baseline."
    )
    anomaly_min_history: int = _setting(
        10, "Readings a device must have before its readings are scored."
    )
    anomaly_threshold: float = _setting(
        10.0, "Robust z-score (|x - median| / scale) above which a reading is an anomaly."
    )
    anomaly_rel_floor: float = _setting(
        0.01, "Lower bound of the scale, as a fraction of |median| (flat signals)."
    )
    anomaly_abs_floor: float = _setting(0.05, "Absolute lower bound of the scale.")
    anomaly_log_metrics: tuple[str, ...] = _setting(
        ("vibration",),
        "Metrics scored on a log scale (sign(x) * log1p(|x|)): skewed, non-negative metrics "
        "whose natural spikes are multiplicative (comma-separated in the env; 'none': no metric).",
    )
    anomaly_log_threshold: float = _setting(
        12.0, "Robust z-score threshold of the log-scored metrics (anomaly_log_metrics)."
    )
    # --- status -----------------------------------------------------------------------------
    silence_s: float = _setting(
        60.0, "A device that sent nothing for this many seconds is reported offline."
    )

    def __post_init__(self) -> None:
        check_master(self.spark_master)
        if (problem := _ks.problem(self)) is not None:
            raise ConfigError(problem)
        for name in ("spark_driver_memory", "spark_executor_memory"):
            if not _JVM_SIZE_RE.match(getattr(self, name)):
                raise ConfigError(f"{name} must be a JVM size like 512m or 2g")
        if self.delta_upkeep_interval_s < 0 or self.delta_retention_hours < 0:
            raise ConfigError("need delta_upkeep_interval_s >= 0 and delta_retention_hours >= 0")
        self.retention_policy()  # the retention items parse (a ConfigError names the bad one)
        if self.delta_max_files_per_day < 0:
            raise ConfigError("delta_max_files_per_day must be >= 0 (0: no bound)")
        if self.spark_executor_cores < 1 or self.spark_cores_max < 0:
            raise ConfigError("need spark_executor_cores >= 1 and spark_cores_max >= 0")
        if not 0 <= self.spark_ui_port <= 65535:
            raise ConfigError("spark_ui_port must be a TCP port (0: no UI)")
        if self.shuffle_partitions < 1:
            raise ConfigError("shuffle_partitions must be >= 1")
        if self.starting_offsets not in _STARTING:
            raise ConfigError(f"starting_offsets must be one of {_STARTING}")
        for name in ("trigger_interval", "watermark"):
            value = getattr(self, name)
            if not _DURATION_RE.match(value):
                raise ConfigError(f"{name} must look like '10 seconds' or '2 minutes': {value!r}")
        if not self.metrics:
            raise ConfigError("metrics must name at least one metric")
        for metric in self.metrics:
            if not _METRIC_RE.match(metric):
                raise ConfigError(f"bad metric name {metric!r} (letters, digits, _)")
        if not self.tables or set(self.tables) - set(TABLE_NAMES):
            raise ConfigError(f"tables must name some of {', '.join(TABLE_NAMES)}")
        if self.max_offsets_per_trigger < 0:
            raise ConfigError("max_offsets_per_trigger must be >= 0")
        if self.anomaly_min_history < 2 or self.anomaly_history < self.anomaly_min_history:
            raise ConfigError("need 2 <= anomaly_min_history <= anomaly_history")
        if self.anomaly_threshold <= 0 or self.anomaly_log_threshold <= 0:
            raise ConfigError("anomaly_threshold and anomaly_log_threshold must be > 0")
        if tuple(m.lower() for m in self.anomaly_log_metrics) == ("none",):
            object.__setattr__(self, "anomaly_log_metrics", ())
        for metric in self.anomaly_log_metrics:
            if not _METRIC_RE.match(metric):
                raise ConfigError(f"bad metric name {metric!r} in anomaly_log_metrics")
        if self.silence_s <= 0:
            raise ConfigError("silence_s must be > 0")
        if str(self.checkpoint_dir) in ("", "."):
            object.__setattr__(self, "checkpoint_dir", self.warehouse_dir / "_checkpoints")

    # --- building ---------------------------------------------------------------------------
    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> AnalyticsConfig:
        """Defaults < ``IOT_*`` environment < ``overrides`` (None values are ignored)."""
        environ = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(env_name(f.name))
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, f.default, raw)
        for name, value in overrides.items():
            if name not in {f.name for f in dataclasses.fields(cls)}:
                raise ConfigError(f"unknown setting {name!r}")
            if value is not None:
                values[name] = value
        if "spark_jars_dir" in values:
            values["spark_jars_dir"] = Path(values["spark_jars_dir"])
        else:
            values["spark_jars_dir"] = default_jars_dir(environ)
        for name in ("warehouse_dir", "checkpoint_dir"):
            if name in values:
                values[name] = Path(values[name])
        return cls(**values)

    @staticmethod
    def describe() -> list[tuple[str, str, str]]:
        """(env name, default, help) of every setting, for docs and ``--help``."""
        out = []
        for f in dataclasses.fields(AnalyticsConfig):
            default = f.default
            shown = ",".join(default) if isinstance(default, tuple) else str(default)
            out.append((env_name(f.name), shown, str(f.metadata["help"])))
        return out

    # --- derived ----------------------------------------------------------------------------
    def table_path(self, table: str) -> Path:
        return self.warehouse_dir / table

    def checkpoint_path(self, query: str) -> Path:
        return self.checkpoint_dir / query

    def retention_policy(self) -> retention.Retention:
        return retention.Retention.parse(self.retention_days, self.retention_tenants)

    @property
    def local(self) -> bool:
        """Spark runs in this process (local mode), not on a cluster."""
        return is_local_master(self.spark_master)

    def spark_conf(self, jars: Sequence[Path] = (), python: str = "") -> dict[str, str]:
        """The Spark settings of a session on this config (``spark.jars``: ``jars``).

        Local mode keeps the driver on loopback. On a cluster, heaps and cores are set
        explicitly (Spark's defaults take every core of the cluster and 1 GiB per executor),
        and ``spark.jars`` is what carries the Kafka connector to the executors: the driver
        serves the files and each executor fetches them before its first task.
        """
        conf = {
            "spark.driver.memory": self.spark_driver_memory,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.session.timeZone": "UTC",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.streaming.metricsEnabled": "true",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
        }
        if self.spark_driver_java_options:
            conf["spark.driver.extraJavaOptions"] = self.spark_driver_java_options
        if self.spark_ui_port:
            conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(self.spark_ui_port)}
        else:
            conf["spark.ui.enabled"] = "false"
        if python:
            conf["spark.pyspark.python"] = python
        if jars:
            conf["spark.jars"] = ",".join(str(j.resolve()) for j in jars)
        conf |= delta_conf(self.shuffle_partitions)
        if self.local:
            # A local job talks only to itself: keep the driver (and its block manager) on
            # loopback instead of the address Spark guesses from the host name.
            conf |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
            return conf
        conf |= {
            "spark.executor.memory": self.spark_executor_memory,
            "spark.executor.cores": str(self.spark_executor_cores),
        }
        if self.spark_executor_java_options:
            conf["spark.executor.extraJavaOptions"] = self.spark_executor_java_options
        if self.spark_cores_max:
            conf["spark.cores.max"] = str(self.spark_cores_max)
        if self.spark_driver_host:
            conf |= {
                "spark.driver.host": self.spark_driver_host,
                "spark.driver.bindAddress": self.spark_driver_host,
            }
        return conf

    def jars(self) -> list[Path]:
        """The connector and Delta jars; empty when the folder does not exist."""
        if not self.spark_jars_dir.is_dir():
            return []
        return sorted(self.spark_jars_dir.glob("*.jar"))


def _convert(name: str, default: Any, raw: str) -> Any:
    try:
        if isinstance(default, bool):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, tuple):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if isinstance(default, Path):
            return Path(raw)
    except ValueError as exc:
        raise ConfigError(
            f"{env_name(name)}={raw!r} is not a valid {type(default).__name__}"
        ) from exc
    return raw
