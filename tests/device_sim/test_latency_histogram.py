"""The latency histogram: exact below 8,192 ms, within its stated bound above, bounded size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from device_sim.accounting import percentile
from device_sim.latency_histogram import (
    EXACT_BELOW,
    RELATIVE_ERROR,
    LatencyHistogram,
    bucket,
)


def test_small_values_are_their_own_bucket() -> None:
    for v in (-EXACT_BELOW + 1, -1, 0, 1, 28, 4748, EXACT_BELOW - 1):
        assert bucket(v) == v


def test_large_values_round_toward_zero_within_the_bound() -> None:
    for v in (EXACT_BELOW, 10_001, 900_000, 86_400_000, -20_000, -(2**40) - 3):
        b = bucket(v)
        assert abs(b) <= abs(v)
        assert abs(v - b) <= abs(v) * RELATIVE_ERROR
        assert bucket(b) == b  # a bucket's key is its own bucket
    assert bucket(10_001) == 10_000  # 1 ms off at 10 s


@settings(max_examples=300)
@given(st.integers(-(2**45), 2**45), st.integers(-(2**45), 2**45))
def test_bucketing_keeps_order(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    assert bucket(lo) <= bucket(hi)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31), min_size=1, max_size=300), st.floats(0, 100))
def test_percentiles_match_the_sorted_values(values: list[int], q: float) -> None:
    hist = LatencyHistogram()
    hist.update(values)
    want = percentile(sorted(float(v) for v in values), q)
    (got,) = hist.percentiles([q])
    if abs(want) < EXACT_BELOW:
        assert got == want
    else:
        assert got == bucket(int(want))
        assert abs(got - want) <= abs(want) * RELATIVE_ERROR
    assert hist.count == len(values)
    assert hist.max == max(values)


def test_size_is_bounded_by_the_spread_not_the_count() -> None:
    hist = LatencyHistogram()
    for v in range(0, 86_400_000, 7):  # a day of spread, 12 million values
        hist.add(v)
    assert hist.count == len(range(0, 86_400_000, 7))
    assert len(hist.counts) < 100_000


def test_merge_and_empty() -> None:
    a, b = LatencyHistogram(), LatencyHistogram()
    a.update([1, 2, 3])
    b.update([4, 100_000])
    a.merge(b)
    assert (a.count, a.max) == (5, 100_000)
    assert a.percentiles([50, 100]) == [3.0, float(bucket(100_000))]
    with pytest.raises(ValueError, match="nothing"):
        LatencyHistogram().percentiles([50])
