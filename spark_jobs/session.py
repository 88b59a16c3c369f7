"""Building the SparkSession from the one config (the only place Spark settings are set)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    # Python workers (pandas UDFs, the anomaly state function) must run this interpreter,
    # the one with pandas/pyarrow, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # our log4j2.properties (warnings only) unless the operator has a Spark conf dir of their own
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "conf"))
log = logging.getLogger(__name__)


def build_session(cfg: AnalyticsConfig, app_name: str, *, kafka: bool = True) -> SparkSession:
    """A session on ``cfg.spark_master``; with ``kafka`` the connector jars are required."""
    from pyspark.sql import SparkSession

    # Python workers (pandas UDFs, the anomaly state function) must run this interpreter,
    # the one with pandas/pyarrow, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # our log4j2.properties (warnings only) unless the operator has a Spark conf dir of their own
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "conf"))
    builder = (
        SparkSession.builder.master(cfg.spark_master)
        .appName(app_name)
        .config("spark.driver.memory", cfg.spark_driver_memory)
        .config("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.metricsEnabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    )
    if cfg.spark_master.startswith("local"):
        # A local job talks only to itself: keep the driver (and its block manager) on loopback
        # instead of the address Spark guesses from the host name.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    jars = cfg.jars()
    if not kafka and jars:
        builder = builder.config("spark.jars", ",".join(str(j.resolve()) for j in jars))
    if kafka:
        if not any(j.name.startswith("spark-sql-kafka") for j in jars):
            raise ConfigError(
                f"no spark-sql-kafka jar in {cfg.spark_jars_dir} (IOT_SPARK_JARS_DIR); "
                "run the set-up script (mvn -f kafka/spark-connector/pom.xml ...) first"
            )
        builder = builder.config("spark.jars", ",".join(str(j.resolve()) for j in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info("spark session %s on %s", app_name, cfg.spark_master)
    return spark


def owns_session() -> bool:
    """True when no session is active yet: the caller creates it and must stop it."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is None
