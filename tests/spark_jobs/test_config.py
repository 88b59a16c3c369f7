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
