"""bench.shard_table: one MQTT shard against two, per run, with where the cores went."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.results import LIMIT, OURS, RunResult
from bench.shard_table import shard_ranges, shard_rows, shard_table


def _run(contender: str, rate: float, payload: int = 1024, **cpu: Any) -> RunResult:
    run = RunResult(contender, "throughput", payload, 1000, 1, duration_s=10.0, msgs_per_s=rate)
    return dataclasses.replace(run, **cpu)


ONE = [
    _run(LIMIT, 40_000.0, broker_cpu_s=9.0),
    _run(OURS, 36_000.0, cpu_s=4.5, broker_cpu_s=8.0, kafka_cpu_s=2.0, machine_cpu_s=19.5),
]
TWO = [
    _run(LIMIT, 50_000.0, broker_cpu_s=14.0),
    _run(
        OURS,
        30_000.0,
        cpu_s=6.0,
        broker_cpu_s=7.0,
        front_cpu_s=3.0,
        kafka_cpu_s=2.0,
        machine_cpu_s=20.0,
        shards=2,
    ),
]


def test_a_row_per_run_and_shard_count_with_the_cores_of_each_process() -> None:
    rows = shard_rows([(1, 1, ONE), (1, 2, TWO)], [1024])
    assert rows == [
        ["1024", "1", "1", "40,000", "0.90", "36,000 (0.90)", "0.80 / - / 0.45 / 0.20 / 1.95"],
        ["1024", "1", "2", "50,000", "1.40", "30,000 (0.60)", "0.70 / 0.30 / 0.60 / 0.20 / 2.00"],
    ]
    table = shard_table([(1, 1, ONE)], [1024], 2)
    assert "Mosquitto / HAProxy / bridge / Kafka / machine cores (of 2)" in table


def test_a_failed_or_missing_run_is_a_dash_not_a_figure() -> None:
    failed = dataclasses.replace(ONE[1], error="boom")
    rows = shard_rows([(2, 1, [ONE[0], failed])], [1024, 200])
    assert rows == [
        ["1024", "2", "1", "40,000", "0.90", "-", "-"],
        ["200", "2", "1", "-", "-", "-", "-"],
    ]


def test_ranges_span_every_run_of_a_shard_count() -> None:
    again = [_run(LIMIT, 42_000.0), _run(OURS, 35_000.0)]
    lines = shard_ranges([(1, 1, ONE), (1, 2, TWO), (2, 1, again)], [1024])
    assert lines == [
        "- 1024 B, 1 shard: ceiling 40,000-42,000, ours 35,000-36,000 msgs/s (2 runs)",
        "- 1024 B, 2 shards: ceiling 50,000, ours 30,000 msgs/s (1 runs)",
    ]
