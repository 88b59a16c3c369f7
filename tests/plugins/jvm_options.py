"""The tests' Kafka brokers run C1-compiled only (`IOT_KAFKA_JVM_OPTS`, stack/settings.py): a
test broker lives for seconds to minutes, where the optimising compiler costs more CPU than it
saves. Measured on the 2-core machine (load 6-9, 2026-11-28): CPU to ready 2.9-3.3 s against
5.4-6.3 s, and 2.4-2.8 s against 3.7-4.1 s for 300,000 records produced and consumed after it;
the suite starts about 40 brokers. Benchmarks and the product keep the JVM's default.

Imported by tests/conftest.py, so set in every pytest process (controller and xdist workers)
before any test; the fixtures' StackConfig.servers_on_free_ports does not read the environment,
so they pass :func:`kafka_jvm_options` themselves. The tests that run a service or `iot-stack
up` with the operator's IOT_* settings stripped from its environment keep this one setting
(:func:`environ_without_settings`), so their brokers run C1 too."""

from __future__ import annotations

import os
from collections.abc import Mapping

TEST_KAFKA_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
KAFKA_JVM_OPTIONS_ENV = "IOT_KAFKA_JVM_OPTS"

# an operator's own value in the environment wins
os.environ.setdefault(KAFKA_JVM_OPTIONS_ENV, TEST_KAFKA_JVM_OPTIONS)


def kafka_jvm_options() -> str:
    """What this run's test brokers use."""
    return os.environ.get(KAFKA_JVM_OPTIONS_ENV, TEST_KAFKA_JVM_OPTIONS)


def environ_without_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the IOT_* settings, which would change what
    a service under test does, but with the tests' Kafka JVM options, which change only its
    CPU cost."""
    source = os.environ if environ is None else environ
    kept = {k: v for k, v in source.items() if not k.startswith("IOT_")}
    kept[KAFKA_JVM_OPTIONS_ENV] = kafka_jvm_options()
    return kept
