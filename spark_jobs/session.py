"""Building the SparkSession from the one config (the only place Spark settings are set)."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.config import AnalyticsConfig
from spark_jobs.delta_conf import DELTA_JAR_PREFIX
from spark_jobs.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent


def build_session(cfg: AnalyticsConfig, app_name: str, *, kafka: bool = True) -> SparkSession:
    """A session on ``cfg.spark_master``; with ``kafka`` the connector jars are required."""
    from pyspark.sql import SparkSession

    # Python workers (pandas UDFs, the anomaly state function) must run this interpreter,
    # the one with pandas/pyarrow, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # our log4j2.properties (warnings only) unless the operator has a Spark conf dir of their own
    os.environ.setdefault("SPARK_CONF_DIR", str(PACKAGE_DIR / "conf"))
    if cfg.local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = cfg.jars()
    if kafka and not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise ConfigError(
            f"no spark-sql-kafka jar in {cfg.spark_jars_dir} (IOT_SPARK_JARS_DIR); "
            "run the set-up script (mvn -f kafka/spark-connector/pom.xml ...) first"
        )
    if not any(j.name.startswith(DELTA_JAR_PREFIX) for j in jars):
        raise ConfigError(
            f"no {DELTA_JAR_PREFIX}*.jar in {cfg.spark_jars_dir} (IOT_SPARK_JARS_DIR): the "
            "warehouse's tables are Delta tables; run the set-up script "
            "(mvn -f kafka/spark-connector/pom.xml ...) first"
        )
    builder = SparkSession.builder.master(cfg.spark_master).appName(app_name)
    for key, value in cfg.spark_conf(jars, os.environ["PYSPARK_PYTHON"]).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not cfg.local:
        # Executors import spark_jobs (the anomaly state function is pickled by reference):
        # ship this very code rather than trust whatever copy a worker's Python finds.
        spark.sparkContext.addPyFile(str(package_zip()))
    log.info(
        "spark session %s on %s (ui %s)", app_name, cfg.spark_master, spark.sparkContext.uiWebUrl
    )
    return spark


def package_zip() -> Path:
    """``spark_jobs`` as a zip (its Python files), for ``addPyFile`` on a cluster."""
    out = Path(tempfile.mkdtemp(prefix="iot-analytics-py-")) / "spark_jobs.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            zf.write(path, Path("spark_jobs") / path.relative_to(PACKAGE_DIR))
    return out


def executor_count(spark: SparkSession) -> int | None:
    """Executors registered with this driver now; None in local mode (the driver runs tasks).

    On a cluster 0 means nothing runs the tasks: the queries wait without an error (no live
    worker, or none with the cores and memory asked for).
    """
    master = spark.sparkContext.master or ""
    if master.startswith("local"):
        return None
    sc = spark.sparkContext._jsc.sc()
    infos = sc.statusTracker().getExecutorInfos()
    return max(len(infos) - 1, 0)  # the driver's block manager is listed too


def owns_session() -> bool:
    """True when this process has no session yet: the caller creates it and must stop it.

    Not ``getActiveSession()`` alone: that is per thread (the JVM's thread-local), so a caller
    on another thread than the session's maker saw none, built "its own" (``getOrCreate`` hands
    back the process's one) and stopped it under everyone else."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        SparkSession.active()  # the thread's active session, else the process's default one
    except PySparkRuntimeError:  # NO_ACTIVE_OR_DEFAULT_SESSION
        return True
    return False
