"""The tests' Kafka brokers (`IOT_KAFKA_JVM_OPTS`, stack/settings.py), Spark drivers
(`IOT_SPARK_DRIVER_JAVA_OPTIONS`, spark_jobs/config.py), Spark standalone masters and workers
(`IOT_STACK_SPARK_DAEMON_JAVA_OPTS`, stack/settings.py) and executors
(`IOT_SPARK_EXECUTOR_JAVA_OPTIONS`, spark_jobs/config.py) run C1-compiled only: a test's JVM lives
for seconds to minutes, where the optimising compiler costs more CPU than it saves. The brokers
and drivers also run the serial collector: their small heaps do not need G1's concurrent work
and write barriers (measured below). C1, measured on the 2-core machine (load 6-9,
2026-11-28): a broker's CPU to ready 2.9-3.3 s against 5.4-6.3 s, and 2.4-2.8 s against 3.7-4.1 s
for 300,000 records produced and consumed after it; the suite starts about 60 brokers.
Benchmarks and the product keep the JVM's defaults.

Imported by tests/conftest.py, so set in every pytest process (controller and xdist workers)
before any test; the fixtures' StackConfig.servers_on_free_ports and the `spark` fixture do not
read the environment, so they pass these values themselves. The tests that run a service or
`iot-stack up` with the operator's IOT_* settings stripped from its environment keep these
settings (:func:`environ_without_settings`), so their JVMs run C1 too."""

from __future__ import annotations

import os
from collections.abc import Mapping

# and the serial collector, not G1 (a 512m heap): a broker's CPU to ready 4.8-5.2 s against
# 5.9-6.1, 300,000 records of 512 B produced and read 1.8-1.9 s against 2.7-3.0, idle 1.1-1.2
# CPU-s in 30 s against 1.2-1.3 (2 runs each, quiet, 2026-12-07)
TEST_KAFKA_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
KAFKA_JVM_OPTIONS_ENV = "IOT_KAFKA_JVM_OPTS"
# The tests' Spark drivers too (the `spark` fixture, `iot-analytics` jobs the tests start, the
# stacks' analytics): a session that writes and reads a small Delta table took 31-33 CPU-s
# against 60-65 with the optimising compiler (load 20-50, 2026-11-28). And the serial
# collector, not G1 (a 512m-1g heap, one driver per test process): four Spark test modules
# (Delta writes, streaming, tenants, migration; one session) 217-228 CPU-s against 252-276 of
# every JVM they ran, 181-189 s against 195-238 s (quiet, 2026-12-07; docs/development.md)
TEST_SPARK_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
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


def jvm_settings() -> dict[str, str]:
    """The four settings above as this run has them: for a service's environment (a process
    or a container) whose JVMs should run as the tests' do."""
    return {name: os.environ.get(name, value) for name, value in _TEST_OPTIONS.items()}


def environ_without_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the IOT_* settings, which would change what
    a service under test does, but with the tests' JVM options, which change only its CPU
    cost."""
    source = os.environ if environ is None else environ
    kept = {k: v for k, v in source.items() if not k.startswith("IOT_")}
    return kept | jvm_settings()
