"""The tests' Kafka brokers (`IOT_KAFKA_JVM_OPTS`, stack/settings.py), Spark drivers
(`IOT_SPARK_DRIVER_JAVA_OPTIONS`, spark_jobs/config.py), Spark standalone masters and workers
(`IOT_STACK_SPARK_DAEMON_JAVA_OPTS`, stack/settings.py) and executors
(`IOT_SPARK_EXECUTOR_JAVA_OPTIONS`, spark_jobs/config.py) run C1-compiled only: a test's JVM lives
for seconds to minutes, where the optimising compiler costs more CPU than it saves. Measured on
the 2-core machine (load 6-9, 2026-11-28): a broker's CPU to ready 2.9-3.3 s against 5.4-6.3 s,
and 2.4-2.8 s against 3.7-4.1 s for 300,000 records produced and consumed after it; the suite
starts about 60 brokers. Benchmarks and the product keep the JVM's default.

Imported by tests/conftest.py, so set in every pytest process (controller and xdist workers)
before any test; the fixtures' StackConfig.servers_on_free_ports and the `spark` fixture do not
read the environment, so they pass these values themselves. The tests that run a service or
`iot-stack up` with the operator's IOT_* settings stripped from its environment keep these
settings (:func:`environ_without_settings`), so their JVMs run C1 too."""

from __future__ import annotations

import os
from collections.abc import Mapping

TEST_KAFKA_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
KAFKA_JVM_OPTIONS_ENV = "IOT_KAFKA_JVM_OPTS"
# The tests' Spark drivers too (the `spark` fixture, `iot-analytics` jobs the tests start, the
# stacks' analytics): a session that writes and reads a small Delta table took 31-33 CPU-s
# against 60-65 with the optimising compiler (load 20-50, 2026-11-28)
TEST_SPARK_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
SPARK_DRIVER_JAVA_OPTIONS_ENV = "IOT_SPARK_DRIVER_JAVA_OPTIONS"
# The standalone clusters' JVMs too (tests/spark_jobs/test_stream_cluster.py,
# tests/stack/test_spark_cluster_integration.py): the master and workers, and the executors a
# worker launches for an application: test_stream_cluster.py took 193-202 CPU-s against 317-321
# with the optimising compiler, test_spark_cluster_integration.py 36-40 against 62-64 (load 12-19,
# 2026-11-29; docs/development.md, "Test time")
TEST_SPARK_DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
SPARK_DAEMON_JAVA_OPTIONS_ENV = "IOT_STACK_SPARK_DAEMON_JAVA_OPTS"
TEST_SPARK_EXECUTOR_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
SPARK_EXECUTOR_JAVA_OPTIONS_ENV = "IOT_SPARK_EXECUTOR_JAVA_OPTIONS"
_TEST_OPTIONS = {
    KAFKA_JVM_OPTIONS_ENV: TEST_KAFKA_JVM_OPTIONS,
    SPARK_DRIVER_JAVA_OPTIONS_ENV: TEST_SPARK_DRIVER_JAVA_OPTIONS,
    SPARK_DAEMON_JAVA_OPTIONS_ENV: TEST_SPARK_DAEMON_JAVA_OPTIONS,
    SPARK_EXECUTOR_JAVA_OPTIONS_ENV: TEST_SPARK_EXECUTOR_JAVA_OPTIONS,
}

# an operator's own value in the environment wins (an empty one: the JVM's default)
for _name, _value in _TEST_OPTIONS.items():
    os.environ.setdefault(_name, _value)


def kafka_jvm_options() -> str:
    """What this run's test brokers use."""
    return os.environ.get(KAFKA_JVM_OPTIONS_ENV, TEST_KAFKA_JVM_OPTIONS)


def spark_driver_java_options() -> str:
    """What this run's Spark drivers use."""
    return os.environ.get(SPARK_DRIVER_JAVA_OPTIONS_ENV, TEST_SPARK_DRIVER_JAVA_OPTIONS)


def spark_daemon_java_options() -> str:
    """What this run's Spark standalone masters and workers use."""
    return os.environ.get(SPARK_DAEMON_JAVA_OPTIONS_ENV, TEST_SPARK_DAEMON_JAVA_OPTIONS)


def environ_without_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the IOT_* settings, which would change what
    a service under test does, but with the tests' JVM options, which change only its CPU
    cost."""
    source = os.environ if environ is None else environ
    kept = {k: v for k, v in source.items() if not k.startswith("IOT_")}
    return kept | {name: os.environ.get(name, value) for name, value in _TEST_OPTIONS.items()}
