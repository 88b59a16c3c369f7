"""The ingest suite's plan before round 1 (the runs themselves need a stack: `make bench`)."""

from __future__ import annotations

from bench.suite import WARMUP_S, round_order, warmup_plan
from bench.suite_options import (
    KAFKA_PERF,
    LIMIT,
    LIMIT_QOS0,
    MQB,
    NAIVE,
    OURS,
    OURS_QOS0,
    PUBLISHER,
    TELEGRAF,
    SuiteOptions,
)


def test_the_java_benchmark_warms_kafka_up_before_our_bridge_does() -> None:
    plan = warmup_plan(SuiteOptions(payloads=(1024, 200)))
    assert plan == [(KAFKA_PERF, 1024, 10.0), (OURS, 1024, WARMUP_S)]


def test_without_the_java_benchmark_only_our_bridge_warms_up() -> None:
    plan = warmup_plan(SuiteOptions(contenders=(OURS, MQB), payloads=(200,)))
    assert plan == [(OURS, 200, WARMUP_S)]


def test_our_warmup_lasts_three_runs_when_runs_are_long() -> None:
    plan = warmup_plan(SuiteOptions(contenders=(OURS,), duration_s=20.0))
    assert plan == [(OURS, 1024, 60.0)]


def test_no_warmup_without_our_bridge_or_when_turned_off() -> None:
    assert warmup_plan(SuiteOptions(contenders=(KAFKA_PERF, MQB))) == []
    assert warmup_plan(SuiteOptions(warmup=False)) == []
    assert warmup_plan(SuiteOptions(payloads=())) == []


def test_kafkas_own_benchmark_runs_last_in_a_round() -> None:
    assert round_order(SuiteOptions()) == [
        PUBLISHER,
        LIMIT,
        LIMIT_QOS0,
        OURS,
        OURS_QOS0,
        NAIVE,
        MQB,
        TELEGRAF,
        KAFKA_PERF,
    ]
    assert round_order(SuiteOptions(contenders=(KAFKA_PERF, MQB, LIMIT))) == [
        LIMIT,
        MQB,
        KAFKA_PERF,
    ]
    assert round_order(SuiteOptions(contenders=(OURS,))) == [OURS]
