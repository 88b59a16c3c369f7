"""The shared `spark` fixture's driver runs with the tests' JVM options (C1 only, the serial
collector)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugins.jvm_options import spark_driver_java_options


@pytest.mark.spark
def test_the_shared_session_runs_the_tests_driver_options(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    arguments = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert spark_driver_java_options() == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"} <= set(arguments), arguments
