"""bench.cpu_share: which process held the CPU in each QoS 1 throughput round."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.cpu_share import cores, cpu_share_table
from bench.results import LIMIT, OURS, RunResult


def _run(contender: str, scenario: str, rate: float, **cpu: Any) -> RunResult:
    run = RunResult(contender, scenario, 1024, 1000, 1, duration_s=10.0, msgs_per_s=rate)
    return dataclasses.replace(run, **cpu)


def test_cores_are_cpu_seconds_over_the_runs_seconds() -> None:
    run = _run(OURS, "throughput", 1.0)
    assert cores(9.5, run) == 0.95
    assert cores(None, run) is None
    assert cores(1.0, RunResult(OURS, "throughput", 1024, 1000, 1)) is None


def test_each_round_pairs_the_ceiling_with_our_bridge() -> None:
    results = [
        _run(LIMIT, "throughput", 66_000.0, broker_cpu_s=9.5, machine_cpu_s=16.3),
        _run(
            OURS,
            "throughput",
            61_600.0,
            cpu_s=5.3,
            broker_cpu_s=9.2,
            kafka_cpu_s=1.1,
            load_cpu_s=4.2,
            machine_cpu_s=20.1,
        ),
        _run(LIMIT, "throughput-repeat", 60_000.0, broker_cpu_s=9.6, machine_cpu_s=16.4),
        _run(OURS, "throughput-repeat", 45_000.0, cpu_s=5.0, broker_cpu_s=7.1),
        _run(OURS, "latency", 30_000.0, cpu_s=4.0),  # not a throughput round
    ]
    table = cpu_share_table(results, [1024, 200], 2)
    lines = table.splitlines()
    assert "(of 2)" in lines[0]
    assert lines[2] == (
        "| 1024 | 1 | 66,000 | 0.95 / 1.63 | 61,600 (0.93) | 0.92 / 2.01 | 0.53 / 0.11 / 0.42 |"
    )
    assert (
        lines[3] == "| 1024 | 2 | 60,000 | 0.96 / 1.64 | 45,000 (0.75) | 0.71 / - | 0.50 / - / - |"
    )
    assert len(lines) == 4  # no 200 B rounds, no latency run
