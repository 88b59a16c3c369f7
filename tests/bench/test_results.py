"""The benchmark's pure accounting: percentiles, rates, seq checks, ratios, tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.results import (
    LIMIT,
    OURS,
    RunResult,
    check_sequences,
    cpu_per_million,
    percentile,
    ratio,
    steady_rate,
)
from bench.results_tables import (
    scaling_table,
    throughput_table,
)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200),
    st.floats(0, 100),
)
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-6)


def test_percentile_known_values() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert percentile(list(range(101)), 99) == 99
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match="0-100"):
        percentile([1], 101)


def test_ratio_and_cpu_per_million() -> None:
    assert ratio(850, 1000) == pytest.approx(0.85)
    assert ratio(None, 1000) is None
    assert ratio(1, 0) is None
    assert cpu_per_million(3.0, 500_000) == pytest.approx(6.0)
    assert cpu_per_million(3.0, 0) is None


def test_steady_rate_leaves_out_warmup_and_drain() -> None:
    # 0-1 s warm-up at 100/s, then 1,000/s until 5 s, then a drain
    samples = [(0.0, 0), (1.0, 100), (2.0, 1100), (3.0, 2100), (4.0, 3100), (5.0, 4100)]
    samples.append((6.0, 4200))
    assert steady_rate(samples, 1.0, 5.0) == pytest.approx(1000.0)
    # a bound between samples uses the last sample before it
    assert steady_rate(samples, 1.5, 5.5) == pytest.approx(1000.0)
    assert steady_rate(samples, 5.0, 5.0) is None
    assert steady_rate([], 0, 1) is None


def test_check_sequences_counts_each_kind() -> None:
    expected = {"a": 4, "b": 3}
    records = [
        ("a", 0, 1),
        ("a", 2, 1),
        ("a", 1, 1),  # below 2 in the same partition: reordered
        ("a", 2, 1),  # duplicate, and not reordered (equal to the top)
        ("b", 0, 2),
        ("b", 2, 3),  # other partition: b spans two partitions, no reorder counted
        ("b", 7, 2),  # seq outside 0..2: unexpected
        ("zz", 0, 0),  # unknown device: unexpected
    ]
    c = check_sequences(records, expected)
    assert c.expected == 7
    assert c.received == 8
    assert c.distinct == 5  # a: 0,1,2  b: 0,2
    assert c.lost == 2  # a3, b1
    assert c.duplicates == 1
    assert c.reordered == 1
    assert c.unexpected == 2
    assert c.devices_multi_partition == 1
    assert not c.clean


def test_check_sequences_clean_run() -> None:
    records = [(d, s, 0) for s in range(3) for d in ("a", "b")]
    c = check_sequences(records, {"a": 3, "b": 3})
    assert c.clean
    assert (c.lost, c.duplicates, c.reordered) == (0, 0, 0)


def _r(contender: str, payload: int, rate: float, **kw: object) -> RunResult:
    return RunResult(contender, "throughput", payload, 1000, 1, msgs_per_s=rate, **kw)  # type: ignore[arg-type]


def test_throughput_table_ratios() -> None:
    results = [
        _r(LIMIT, 1024, 40_000.0),
        _r(OURS, 1024, 34_000.0, lost=0, duplicates=0, reordered=0, cpu_s_per_million=20.0),
        _r("naive-bridge", 1024, 8_500.0, lost=0, duplicates=3, reordered=0),
        RunResult(OURS, "latency", 1024, 1000, 1, latency_p50_ms=4.0, latency_p99_ms=12.5),
        RunResult(
            OURS, "latency-low", 1024, 1000, 1, latency_p50_ms=2.0, latency_p99_ms=9.0, lost=2
        ),
    ]
    table = throughput_table(results, [1024])
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    ours = [c.strip() for c in rows[OURS].split("|")[1:-1]]
    # contender, msgs/s, vs limit, vs ours, p50, p99, p50/p99 at 1 %, cpu, rss, lost, dup, reord
    assert ours[1:5] == ["34,000", "0.85", "1.00", "4.0"]
    assert ours[5] == "12.5"
    assert ours[6] == "2.0 / 9.0"
    assert ours[7] == "20.0"
    assert ours[9] == "2"  # the low-load run's losses count too
    naive = [c.strip() for c in rows["naive-bridge"].split("|")[1:-1]]
    assert naive[2:4] == ["0.21", "0.25"]
    assert naive[6] == "-"
    assert naive[9:12] == ["0", "3", "0"]


def test_scaling_table_relative_to_one_process() -> None:
    results = [
        _r(OURS, 1024, 30_000.0),
        RunResult(OURS, "scaling", 1024, 1000, 1, processes=2, msgs_per_s=45_000.0),
        RunResult(OURS, "scaling", 1024, 10_000, 1, processes=1, msgs_per_s=27_000.0),
    ]
    lines = scaling_table(results).splitlines()[2:]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines]
    assert [(c[1], c[2], c[4]) for c in cells] == [
        ("1,000", "1", "1.00"),
        ("1,000", "2", "1.50"),
        ("10,000", "1", "0.90"),
    ]


def test_keep_best_relabels_the_slower_repeats() -> None:
    from bench.suite import keep_best

    runs = [
        _r(OURS, 1024, 20_000.0, lost=2),
        _r(OURS, 1024, 25_000.0, lost=0),
        RunResult(OURS, "throughput", 1024, 1000, 1, error="boom"),
    ]
    best = keep_best(runs)
    assert best is runs[1]
    assert [r.scenario for r in runs] == ["throughput-repeat", "throughput", "throughput-repeat"]
    assert "best of 3 runs (20,000, 25,000, failed msgs/s)" in best.notes
    assert "the other runs lost 2" in best.notes


def test_keep_best_prefers_runs_without_loss() -> None:
    from bench.suite import keep_best

    runs = [_r(OURS, 1024, 30_000.0, lost=5), _r(OURS, 1024, 25_000.0, lost=0)]
    assert keep_best(runs) is runs[1]
    lossy = [_r(OURS, 1024, 30_000.0, lost=5), _r(OURS, 1024, 20_000.0, lost=1)]
    assert keep_best(lossy) is lossy[0]


def test_spread_over_repeated_runs_pairs_rounds() -> None:
    from bench.results_tables import (
        fmt_range,
        paired_ratios,
        spread_table,
        throughput_runs,
        value_range,
    )

    def rep(contender: str, rate: float, cpu: float) -> RunResult:
        r = _r(contender, 1024, rate, cpu_s_per_million=cpu)
        r.scenario = "throughput-repeat"
        return r

    results = [
        _r(LIMIT, 1024, 60_000.0),
        _r(OURS, 1024, 54_000.0, cpu_s_per_million=9.0),
        rep(LIMIT, 40_000.0, 3.0),
        rep(OURS, 30_000.0, 12.0),
        rep(LIMIT, 50_000.0, 3.0),
        RunResult(OURS, "throughput-repeat", 1024, 1000, 1, error="boom"),
    ]
    ours = throughput_runs(results, OURS, 1024)
    assert [r.msgs_per_s for r in ours] == [54_000.0, 30_000.0]  # the failed run is left out
    assert paired_ratios(ours, throughput_runs(results, LIMIT, 1024)) == [0.9, 0.75]
    assert value_range([None, 2.0, 1.0]) == (1.0, 2.0, 2)
    assert value_range([None]) is None
    assert fmt_range((0.75, 0.9, 2), 2) == "0.75-0.90"
    assert fmt_range((5.0, 5.0, 1)) == "5"
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in spread_table(results, [1024]).splitlines()[2:]
    }
    assert rows[OURS] == ["1024", "2", "30,000-54,000", "0.75-0.90", "1.00", "9.0-12.0", "-"]
    assert rows[LIMIT][1:4] == ["3", "40,000-60,000", "1.00"]


def test_every_run_shows_kafkas_and_the_machines_cpu_beside_the_contenders() -> None:
    from bench.results_tables import runs_table

    run = RunResult(OURS, "throughput", 1024, 1000, 1, msgs_per_s=45_000.0, cpu_s=4.9)
    run.broker_cpu_s, run.load_cpu_s, run.kafka_cpu_s, run.machine_cpu_s = 7.9, 3.8, 3.1, 19.6
    head, _, row = runs_table([run]).splitlines()
    cells = dict(zip(head.split("|"), row.split("|"), strict=True))
    assert cells[" Kafka CPU s "].strip() == "3.1"
    assert cells[" machine busy CPU s "].strip() == "19.6"
    assert cells[" Mosquitto CPU s "].strip() == "7.9"
