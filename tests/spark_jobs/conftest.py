"""One local Spark session for every spark test (``local[2]``, 2 shuffle partitions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spark_jobs.config import AnalyticsConfig


@pytest.fixture(scope="session")
def spark_config() -> AnalyticsConfig:
    return AnalyticsConfig.load(
        env={}, spark_master="local[2]", shuffle_partitions=2, spark_driver_memory="1g"
    )


@pytest.fixture(scope="session")
def spark(spark_config: AnalyticsConfig) -> Iterator[Any]:
    from spark_jobs.session import build_session

    session = build_session(spark_config, "iot-analytics-tests", kafka=False)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
