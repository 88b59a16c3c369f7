"""LatencyTimeline against percentiles computed from the raw values, window by window."""

from __future__ import annotations

import random

import pytest

from device_sim.accounting import Accountant, DeviceExpectation, Expectations, percentile
from device_sim.latency_timeline import LatencyTimeline


def _values(seed: int, n: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    base = 1_795_000_000_000
    return [(base + rng.randrange(0, 60_000), rng.randrange(0, 3_000)) for _ in range(n)]


def test_rows_match_nearest_rank_percentiles_of_each_window() -> None:
    values = _values(1, 5_000)
    timeline = LatencyTimeline(10_000)
    for ts, lat in values:
        timeline.add(ts, lat)
    rows = timeline.rows()
    by_window: dict[int, list[int]] = {}
    for ts, lat in values:
        by_window.setdefault(ts - ts % 10_000, []).append(lat)
    assert [r["start_ms"] for r in rows] == sorted(by_window)
    for row in rows:
        lats = sorted(by_window[row["start_ms"]])
        assert row["count"] == len(lats)
        assert row["p50_ms"] == percentile(lats, 50)
        assert row["p95_ms"] == percentile(lats, 95)
        assert row["p99_ms"] == percentile(lats, 99)
        assert row["max_ms"] == lats[-1]


def test_merge_equals_one_timeline_of_everything() -> None:
    values = _values(2, 2_000)
    whole, a, b = LatencyTimeline(5_000), LatencyTimeline(5_000), LatencyTimeline(5_000)
    for i, (ts, lat) in enumerate(values):
        whole.add(ts, lat)
        (a if i % 2 else b).add(ts, lat)
    a.merge(b)
    assert a.rows() == whole.rows()


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_ms"):
        LatencyTimeline(0)


def test_accountant_timeline_counts_every_latency_once() -> None:
    expected = Expectations({"d1": DeviceExpectation(sent=100), "d2": DeviceExpectation(sent=100)})
    accountant = Accountant(expected, timeline_ms=1_000)
    rows = [
        (dev, seq, 0, 1_000_000 + seq * 100, 1_000_000 + seq * 100 - seq, None)
        for dev in ("d1", "d2")
        for seq in range(1, 101)
    ]
    accountant.add_telemetry(rows)
    report = accountant.report()
    timeline = report.latency_timeline
    assert sum(r["count"] for r in timeline) == report.latency.count == 200
    # latency = seq ms; window k (1,000 ms) holds seqs 10k..10k+9 of each device
    assert timeline[0]["start_ms"] == 1_000_000
    assert timeline[0]["max_ms"] == 9
    assert timeline[-1]["max_ms"] == 100
    assert Accountant(expected).report().latency_timeline == []
