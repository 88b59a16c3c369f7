import math
from typing import Any

import pytest

from bench.soak import analysis

BOUNDS = [0.001, 0.01, 0.1, 1.0, math.inf]


def _samples(rates: list[int], rss: list[int], lag: list[list[int]]) -> list[dict[str, Any]]:
    """One sample every 10 s; ``rates[i]`` msgs/s during the interval ending at sample i+1."""
    out: list[dict[str, Any]] = [
        {"t_s": 0.0, "delivered": 0, "bridge_rss_mb": rss[0], "ack_lag": lag[0]}
    ]
    for i, rate in enumerate(rates):
        out.append(
            {
                "t_s": 10.0 * (i + 1),
                "delivered": out[-1]["delivered"] + int(rate * 10),
                "bridge_rss_mb": rss[i + 1],
                "ack_lag": lag[i + 1],
            }
        )
    return out


def test_bucket_quantile_is_the_upper_bound_of_the_bucket_holding_the_rank() -> None:
    cumulative = [90, 99, 100, 100, 100]
    assert analysis.bucket_quantile(BOUNDS, cumulative, 0.5) == 0.001
    assert analysis.bucket_quantile(BOUNDS, cumulative, 0.99) == 0.01
    assert analysis.bucket_quantile(BOUNDS, cumulative, 1.0) == 0.1
    assert analysis.bucket_quantile(BOUNDS, [0, 0, 0, 0, 0], 0.99) is None
    assert analysis.bucket_quantile(BOUNDS, [0, 0, 0, 0, 5], 0.5) == math.inf


def test_a_flat_run_passes() -> None:
    lag = [[0, 0, 0, 0, 0]] + [[100 * i] * 5 for i in range(1, 7)]
    samples = _samples([1000] * 6, [40, 44, 45, 45, 46, 45, 46], lag)
    fig = analysis.figures(samples, BOUNDS, duration_s=60, window_s=20)
    assert fig.first_rate == pytest.approx(1000)
    assert fig.last_rate == pytest.approx(1000)
    assert fig.rate_ratio == pytest.approx(1.0)
    assert fig.rss_ratio == pytest.approx(46 / 44)  # medians of the first and last windows
    assert fig.ack_lag_p99_s == 0.001
    assert fig.acked_in_run == 600
    v = analysis.verdict(fig, lost=0, offered=1000, delivered_rate=1000)
    assert v.ok, v.failures


def test_every_target_missed_is_named() -> None:
    # the rate sags, RSS doubles, the lag sits in the (1 s, inf) bucket, one record lost
    lag = [[0, 0, 0, 0, 0]] + [[0, 0, 0, 0, 10 * i] for i in range(1, 7)]
    samples = _samples([1000, 1000, 900, 800, 700, 700], [40, 40, 40, 60, 80, 80, 80], lag)
    fig = analysis.figures(samples, BOUNDS, duration_s=60, window_s=20)
    assert fig.rate_ratio == pytest.approx(0.7)
    v = analysis.verdict(fig, lost=1, offered=1000, delivered_rate=850)
    assert not v.ok
    joined = " | ".join(v.failures)
    wanted = (
        "last window's rate 0.700",
        "RSS grew 2.00x",
        "ack lag p99 inf",
        "1 messages lost",
        "carried 850 of 1,000",
    )
    for words in wanted:
        assert words in joined


def test_unverified_and_unmeasured_runs_fail() -> None:
    fig = analysis.figures([{"t_s": 0.0, "delivered": 0}], BOUNDS, duration_s=60, window_s=20)
    v = analysis.verdict(fig, lost=None, offered=1000, delivered_rate=None)
    assert not v.ok
    assert "not verified" in v.failures
    assert "no ack lag observed (no QoS 1 acknowledgements?)" in v.failures


def test_timeline_rates_rss_and_lag_per_interval() -> None:
    lag = [[0, 0, 0, 0, 0], [50, 99, 100, 100, 100], [50, 99, 100, 100, 100]]
    rows = analysis.timeline(_samples([500, 250], [40, 41, 42], lag), BOUNDS)
    assert [r["t_s"] for r in rows] == [10.0, 20.0]
    assert [r["msgs_per_s"] for r in rows] == [500, 250]
    assert [r["bridge_rss_mb"] for r in rows] == [41, 42]
    assert rows[0]["ack_lag_p99_s"] == 0.01
    assert rows[1]["ack_lag_p99_s"] is None  # nothing acknowledged in that interval


def test_a_window_shorter_than_two_samples_still_has_a_rate() -> None:
    lag = [[0, 0, 0, 0, 0]] * 4
    samples = _samples([500, 600, 700], [40, 40, 40, 40], lag)  # samples every 10 s
    assert analysis.window_rate(samples, 0.0, 6.0) is None  # no sample after t=0 inside
    assert analysis.window_rate(samples, 0.0, 12.0) == 500
    assert analysis.window_rate(samples, 24.0, 30.0) == 700
