from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.config import DEFAULT_JARS_DIR, REPO_ROOT, AnalyticsConfig, env_name
from spark_jobs.errors import ConfigError


def test_defaults() -> None:
    cfg = AnalyticsConfig.load(env={})
    assert cfg.spark_master == "local[*]"
    assert cfg.watermark == "2 minutes"
    assert cfg.warehouse_dir == Path("var/warehouse")
    assert cfg.checkpoint_dir == Path("var/warehouse/_checkpoints")
    assert cfg.spark_jars_dir == REPO_ROOT / "kafka" / "spark-connector" / "libs"
    assert cfg.metrics == ("temperature", "humidity", "battery", "vibration")


def test_env_names_match_the_bridge() -> None:
    assert env_name("kafka_bootstrap") == "IOT_KAFKA_BOOTSTRAP"
    assert env_name("topic_telemetry") == "IOT_TOPIC_TELEMETRY"
    assert env_name("topic_presence") == "IOT_TOPIC_PRESENCE"


def test_env_then_overrides() -> None:
    env = {
        "IOT_KAFKA_BOOTSTRAP": "k:1",
        "IOT_SHUFFLE_PARTITIONS": "7",
        "IOT_METRICS": "a, b",
        "IOT_FAIL_ON_DATA_LOSS": "yes",
        "IOT_WAREHOUSE_DIR": "/w",
        "IOT_CHECKPOINT_DIR": "/c",
        "IOT_SPARK_JARS_DIR": "/jars",
        "IOT_TABLES": "device_minute, rejects",
    }
    cfg = AnalyticsConfig.load(env=env, shuffle_partitions=3, spark_master=None)
    assert cfg.kafka_bootstrap == "k:1"
    assert cfg.shuffle_partitions == 3  # override beats env
    assert cfg.spark_master == "local[*]"  # None override ignored
    assert cfg.metrics == ("a", "b")
    assert cfg.fail_on_data_loss is True
    assert cfg.warehouse_dir == Path("/w")
    assert cfg.checkpoint_path("device_minute") == Path("/c/device_minute")
    assert cfg.spark_jars_dir == Path("/jars")
    assert cfg.jars() == []  # no such folder
    assert cfg.tables == ("device_minute", "rejects")


@pytest.mark.parametrize(
    ("env", "overrides"),
    [
        ({"IOT_SHUFFLE_PARTITIONS": "x"}, {}),
        ({}, {"shuffle_partitions": 0}),
        ({}, {"watermark": "2 fortnights"}),
        ({}, {"trigger_interval": "soon"}),
        ({}, {"starting_offsets": "middle"}),
        ({}, {"metrics": ("ok", "bad name")}),
        ({}, {"anomaly_min_history": 50, "anomaly_history": 10}),
        ({}, {"silence_s": 0.0}),
        ({"IOT_TABLES": "device_minute,no_such_table"}, {}),
        ({}, {"tables": ()}),
        ({}, {"no_such_setting": 1}),
    ],
)
def test_rejects_bad_settings(env: dict[str, str], overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        AnalyticsConfig.load(env=env, **overrides)


def test_describe_lists_every_setting() -> None:
    names = [name for name, _, _ in AnalyticsConfig.describe()]
    assert "IOT_WATERMARK" in names
    assert "IOT_SPARK_JARS_DIR" in names
    assert all(help_text for _, _, help_text in AnalyticsConfig.describe())


def test_connector_jars_found_in_the_default_dir() -> None:
    cfg = AnalyticsConfig.load(env={})
    if not DEFAULT_JARS_DIR.is_dir():
        pytest.fail(f"{DEFAULT_JARS_DIR} missing: run the set-up script")
    names = [j.name for j in cfg.jars()]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert any(n.startswith("kafka-clients-") for n in names)


@pytest.mark.parametrize(
    "master", ["local", "local[*]", "local[2]", "local[4,3]", "spark://127.0.0.1:7077",
               "spark://m1.example:7077,m2.example:7077"],
)  # fmt: skip
def test_masters_accepted(master: str) -> None:
    assert AnalyticsConfig.load(env={"IOT_SPARK_MASTER": master}).spark_master == master


@pytest.mark.parametrize(
    "master", ["", "local[0]", "local[x]", "spark://host", "spark://:7077", "yarn",
               "http://127.0.0.1:8080", "spark://h:7077/"],
)  # fmt: skip
def test_masters_rejected(master: str) -> None:
    with pytest.raises(ConfigError, match="spark_master must be"):
        AnalyticsConfig.load(env={}, spark_master=master)


@pytest.mark.parametrize(
    "overrides",
    [
        {"spark_executor_memory": "lots"},
        {"spark_driver_memory": "0g"},
        {"spark_executor_cores": 0},
        {"spark_cores_max": -1},
        {"spark_ui_port": 70000},
    ],
)
def test_rejects_bad_spark_resources(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        AnalyticsConfig.load(env={}, **overrides)


def test_driver_java_options_only_when_set() -> None:
    assert "spark.driver.extraJavaOptions" not in AnalyticsConfig.load(env={}).spark_conf()
    env = {"IOT_SPARK_DRIVER_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1"}
    conf = AnalyticsConfig.load(env=env).spark_conf()
    assert conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"


def test_executor_java_options_only_when_set_and_on_a_cluster() -> None:
    cluster = "spark://127.0.0.1:7077"
    conf = AnalyticsConfig.load(env={}, spark_master=cluster).spark_conf()
    assert "spark.executor.extraJavaOptions" not in conf
    env = {"IOT_SPARK_EXECUTOR_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    conf = AnalyticsConfig.load(env=env, spark_master=cluster).spark_conf()
    assert conf["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert "spark.driver.extraJavaOptions" not in conf  # each JVM its own setting
    # local mode has no executor JVM: the driver's options are the ones that count
    assert "spark.executor.extraJavaOptions" not in AnalyticsConfig.load(env=env).spark_conf()


def test_local_spark_conf_keeps_the_driver_on_loopback_without_ui() -> None:
    cfg = AnalyticsConfig.load(env={}, spark_master="local[2]", spark_driver_memory="768m")
    conf = cfg.spark_conf([Path("/j/a.jar"), Path("/j/b.jar")], "/venv/bin/python")
    assert cfg.local
    assert conf == {
        "spark.driver.memory": "768m",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.pyspark.python": "/venv/bin/python",
        "spark.jars": "/j/a.jar,/j/b.jar",
        # Delta Lake, and its two defaults that cost minutes on 2 cores cut to the partitions
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def test_cluster_spark_conf_sets_heaps_cores_jars_and_ui_from_env() -> None:
    env = {
        "IOT_SPARK_MASTER": "spark://127.0.0.1:7077",
        "IOT_SPARK_EXECUTOR_MEMORY": "384m",
        "IOT_SPARK_EXECUTOR_CORES": "1",
        "IOT_SPARK_CORES_MAX": "2",
        "IOT_SPARK_DRIVER_HOST": "127.0.0.1",
        "IOT_SPARK_UI_PORT": "4040",
    }
    cfg = AnalyticsConfig.load(env=env)
    conf = cfg.spark_conf([Path("/j/spark-sql-kafka.jar")])
    assert not cfg.local
    assert {k: v for k, v in conf.items() if not k.startswith("spark.sql")} == {
        "spark.driver.memory": "1g",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "true",
        "spark.ui.port": "4040",
        # the connector reaches the executors through spark.jars (served by the driver)
        "spark.jars": "/j/spark-sql-kafka.jar",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        "spark.executor.memory": "384m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    # no cap, no driver host: Spark's own choices (every free core, the host name's address)
    bare = AnalyticsConfig.load(env={"IOT_SPARK_MASTER": "spark://m:7077"}).spark_conf()
    assert "spark.cores.max" not in bare
    assert "spark.driver.host" not in bare
    assert "spark.jars" not in bare


def test_jars_dir_follows_iot_home_as_the_launcher_does() -> None:
    """An installed copy (the Docker image: IOT_HOME=/opt/iot) finds the connector jars under
    IOT_HOME, as stack/paths.py finds the broker's (issue 33, bug 3)."""
    cfg = AnalyticsConfig.load(env={"IOT_HOME": "/opt/iot"})
    assert cfg.spark_jars_dir == Path("/opt/iot/kafka/spark-connector/libs")
    explicit = AnalyticsConfig.load(env={"IOT_HOME": "/opt/iot", "IOT_SPARK_JARS_DIR": "/jars"})
    assert explicit.spark_jars_dir == Path("/jars")


def test_the_tables_setting_names_the_tables_the_job_writes() -> None:
    from spark_jobs import schemas

    assert set(AnalyticsConfig.load(env={}).tables) == set(schemas.TABLES)
