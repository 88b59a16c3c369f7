"""The test run's JVM options: set for every pytest process, and kept for the services and
`iot-stack up` runs the tests start with the other IOT_* settings stripped."""

from __future__ import annotations

import os

from tests.plugins.jvm_options import (
    KAFKA_JVM_OPTIONS_ENV,
    SPARK_DAEMON_JAVA_OPTIONS_ENV,
    SPARK_DRIVER_JAVA_OPTIONS_ENV,
    SPARK_EXECUTOR_JAVA_OPTIONS_ENV,
    environ_without_settings,
    spark_daemon_java_options,
)

OPTIONS = (
    KAFKA_JVM_OPTIONS_ENV,
    SPARK_DRIVER_JAVA_OPTIONS_ENV,
    SPARK_DAEMON_JAVA_OPTIONS_ENV,
    SPARK_EXECUTOR_JAVA_OPTIONS_ENV,
)


def test_the_run_sets_the_spark_cluster_jvm_options() -> None:
    assert os.environ[SPARK_DAEMON_JAVA_OPTIONS_ENV] == "-XX:TieredStopAtLevel=1"
    assert os.environ[SPARK_EXECUTOR_JAVA_OPTIONS_ENV] == "-XX:TieredStopAtLevel=1"
    assert spark_daemon_java_options() == "-XX:TieredStopAtLevel=1"


def test_environ_without_settings_keeps_only_the_jvm_options() -> None:
    source = {"PATH": "/bin", "IOT_KAFKA_BOOTSTRAP": "elsewhere:9092", **dict.fromkeys(OPTIONS)}
    kept = environ_without_settings({k: v or "-Xss9m" for k, v in source.items()})
    assert kept == {"PATH": "/bin"} | {name: os.environ[name] for name in OPTIONS}
