"""The tests' Kafka brokers run C1-compiled only (`IOT_KAFKA_JVM_OPTS`, stack/settings.py): a
test broker lives for seconds to minutes, where the optimising compiler costs more CPU than it
saves. Measured on the 2-core machine (load 6-9, 2026-11-28): CPU to ready 2.9-3.3 s against
5.4-6.3 s, and 2.4-2.8 s against 3.7-4.1 s for 300,000 records produced and consumed after it;
the suite starts about 40 brokers. Benchmarks and the product keep the JVM's default.

Imported by tests/conftest.py, so set in every pytest process (controller and xdist workers)
before any test; the fixtures' StackConfig.servers_on_free_ports does not read the environment,
so they pass :func:`kafka_jvm_options` themselves. Not yet covered: the tests that run
`iot-stack up` with the IOT_* variables stripped from its environment (about ten brokers of a
run still start with C2)."""

from __future__ import annotations

import os

TEST_KAFKA_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
KAFKA_JVM_OPTIONS_ENV = "IOT_KAFKA_JVM_OPTS"

# an operator's own value in the environment wins
os.environ.setdefault(KAFKA_JVM_OPTIONS_ENV, TEST_KAFKA_JVM_OPTIONS)


def kafka_jvm_options() -> str:
    """What this run's test brokers use."""
    return os.environ.get(KAFKA_JVM_OPTIONS_ENV, TEST_KAFKA_JVM_OPTIONS)
