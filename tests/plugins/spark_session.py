"""One local Spark session for every test that needs Spark in the test process (``local[2]``, 2
shuffle partitions), whatever its folder: a test must not build and stop a session of its own,
since `getOrCreate` would hand it this shared one and stopping it breaks every later Spark test
of the worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spark_jobs.config import AnalyticsConfig
from tests.plugins.jvm_options import spark_driver_java_options


@pytest.fixture(scope="session")
def spark_config() -> AnalyticsConfig:
    return AnalyticsConfig.load(
        env={},
        spark_master="local[2]",
        shuffle_partitions=2,
        spark_driver_memory="1g",
        spark_driver_java_options=spark_driver_java_options(),
    )


@pytest.fixture(scope="session")
def spark(spark_config: AnalyticsConfig) -> Iterator[Any]:
    from spark_jobs.session import build_session

    session = build_session(spark_config, "iot-analytics-tests", kafka=False)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
