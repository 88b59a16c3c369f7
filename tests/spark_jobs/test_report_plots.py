"""The report's plots: time axes span the data's minutes, a single minute is drawn (no Spark)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib import dates as mdates

from spark_jobs import report_plots

T0 = dt.datetime(2026, 1, 1, 12, 0)  # naive UTC, as Spark's toPandas returns it
UTC = dt.UTC


def _fleet(minutes: list[int]) -> Any:
    return pd.DataFrame(
        {
            "window_start": [T0 + dt.timedelta(minutes=m) for m in minutes],
            "messages": [120 + m for m in minutes],
            "late_messages": [0 for _ in minutes],
            "active_devices": [2 for _ in minutes],
            "t_p50": [20.0 + m for m in minutes],
            "t_p95": [25.0 + m for m in minutes],
        }
    )


def _xlim(fig: Any) -> list[dt.datetime]:
    [ax] = fig.axes
    return [d.replace(tzinfo=None) for d in mdates.num2date(ax.get_xlim(), tz=UTC)]


def _series(fig: Any, label: str) -> tuple[list[dt.datetime], list[float]]:
    """A line's points, x as naive UTC datetimes (the plot holds the date axis' numbers)."""
    [ax] = fig.axes
    line = next(line for line in ax.lines if line.get_label() == label)
    x = [d.replace(tzinfo=None) for d in mdates.num2date(line.get_xdata(), tz=UTC)]
    return x, [float(y) for y in line.get_ydata()]


def test_one_minute_is_drawn_over_that_minute() -> None:
    fleet = _fleet([0])
    end = (T0 + dt.timedelta(minutes=1)).replace(tzinfo=UTC)  # aware UTC is accepted too
    fig = report_plots.fleet_traffic(fleet, T0.replace(tzinfo=UTC), end)
    assert _xlim(fig) == [T0, T0 + dt.timedelta(minutes=1)]  # not four years of empty axes
    x, y = _series(fig, "messages / minute")
    assert (x, y) == ([T0, T0 + dt.timedelta(minutes=1)], [120.0, 120.0])  # a visible segment
    assert _series(fig, "active devices")[1] == [2.0, 2.0]
    assert fig.axes[0].get_ylim()[0] == 0


def test_axes_span_the_data_minutes() -> None:
    fleet = _fleet([0, 1, 2, 5])
    start, end = T0, T0 + dt.timedelta(minutes=6)
    for fig in (
        report_plots.fleet_traffic(fleet, start, end),
        report_plots.fleet_percentiles(fleet, start, end, "t"),
    ):
        assert _xlim(fig) == [start, end]
    # minutes 3 and 4 have no row: 0 messages (not minute 2's value carried on), no p95
    x, messages = _series(report_plots.fleet_traffic(fleet, start, end), "messages / minute")
    assert x == [T0 + dt.timedelta(minutes=m) for m in range(7)]
    assert messages == [120.0, 121.0, 122.0, 0.0, 0.0, 125.0, 125.0]
    p95 = _series(report_plots.fleet_percentiles(fleet, start, end, "t"), "p95")[1]
    assert [None if math.isnan(v) else v for v in p95] == [25.0, 26.0, 27.0, None, None, 30.0, 30.0]


def test_no_fleet_rows_still_spans_the_range() -> None:
    fig = report_plots.fleet_traffic(_fleet([]), T0, T0 + dt.timedelta(minutes=3))
    assert _xlim(fig) == [T0, T0 + dt.timedelta(minutes=3)]
    [ax] = fig.axes
    assert len(ax.lines) == 0
    assert [t.get_text() for t in ax.texts] == ["no fleet_minute rows"]


def test_uptime_histogram_spans_zero_to_one(tmp_path: Path) -> None:
    devices = pd.DataFrame({"uptime": [1.0, 1.0, 0.5]})
    fig: Any = report_plots.uptime_histogram(devices)
    [ax] = fig.axes
    assert ax.get_xlim() == pytest.approx((0.0, 1.0))
    assert sum(p.get_height() for p in ax.patches) == 3
    path = report_plots.save(fig, tmp_path / "uptime.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
