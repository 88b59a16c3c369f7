"""The fleet report's plots: matplotlib figures from the report's pandas frames (no Spark).

Time axes span the minutes the data covers (``start`` .. ``end``), not the requested range:
a one-minute run is drawn over that minute. Each per-minute value is drawn as a step across
its minute, so a single minute is a visible segment, not a lone point on empty axes, and a
minute without data shows as such (0 messages, a gap in a percentile).
Figures are built without pyplot (no global state, no GUI backend).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

from matplotlib import dates as mdates
from matplotlib.figure import Figure

SIZE = (9, 3.6)


def naive_utc(t: Any) -> dt.datetime:
    """A naive UTC datetime (Spark's toPandas returns naive UTC timestamps)."""
    value: dt.datetime = t.to_pydatetime() if hasattr(t, "to_pydatetime") else t
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _time_axes(start: dt.datetime, end: dt.datetime, title: str) -> tuple[Figure, Any]:
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlim(float(mdates.date2num(naive_utc(start))), float(mdates.date2num(naive_utc(end))))
    ax.set_xlabel("UTC")
    ax.set_title(title)
    return fig, ax


def _per_minute(
    ax: Any,
    fleet: Any,
    column: str,
    span: tuple[dt.datetime, dt.datetime],
    *,
    label: str,
    fill: float,
) -> None:
    """One step per minute of the span, from the minute's start to the next one. A minute
    without a fleet_minute row is ``fill``: 0 for counts (nothing arrived), NaN for statistics
    (a gap in the line), never the previous minute's value carried over."""
    import pandas as pd

    if not len(fleet):
        return
    start, end = naive_utc(span[0]), naive_utc(span[1])
    minutes = pd.date_range(start, end, freq="min", inclusive="left")
    index = pd.to_datetime(fleet["window_start"], utc=True).dt.tz_localize(None)  # naive UTC
    values = fleet.set_index(index)[column].astype(float)
    # whole arrays, x as the date axis' own numbers: a report over months has 100,000s of
    # minutes per line, and a Python datetime per minute (which matplotlib then converts one
    # by one) took 3.6-4.0 CPU-s for both figures of an 85-day span, against 0.2-0.3
    y: list[float] = values.reindex(minutes, fill_value=fill).to_numpy(dtype=float).tolist()
    x = [*mdates.date2num(minutes.to_numpy()).tolist(), float(mdates.date2num(end))]
    ax.step(x, [*y, y[-1]], where="post", label=label)


def fleet_traffic(fleet: Any, start: dt.datetime, end: dt.datetime) -> Figure:
    fig, ax = _time_axes(start, end, "Fleet traffic per minute")
    for column, label in [
        ("messages", "messages / minute"),
        ("late_messages", "late"),
        ("active_devices", "active devices"),
    ]:
        _per_minute(ax, fleet, column, (start, end), label=label, fill=0.0)
    ax.set_ylim(bottom=0)
    _finish(ax, fleet)
    return fig


def fleet_percentiles(fleet: Any, start: dt.datetime, end: dt.datetime, metric: str) -> Figure:
    fig, ax = _time_axes(start, end, f"Fleet {metric} per minute")
    for q in ("p50", "p95"):
        _per_minute(ax, fleet, f"{metric}_{q}", (start, end), label=q, fill=math.nan)
    _finish(ax, fleet)
    return fig


def uptime_histogram(devices: Any) -> Figure:
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    ax.hist(devices["uptime"].clip(upper=1.0), bins=20, range=(0.0, 1.0))
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("uptime (fraction of the data's minutes with data from the device)")
    ax.set_ylabel("devices")
    ax.set_title("Uptime per device")
    return fig


def top_anomalies(anomalous: Any, top: int) -> Figure:
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    ax.barh(list(anomalous["device_id"])[::-1], list(anomalous["anomalies"])[::-1])
    ax.set_title(f"Most anomalous devices (top {top})")
    return fig


def _finish(ax: Any, fleet: Any) -> None:
    if len(fleet):
        # beside the axes: never over the data, and no "best" place to search for, which scans
        # every point (4 CPU-s for both figures of an 85-day span, against 8-9 with "best")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        ax.text(0.5, 0.5, "no fleet_minute rows", transform=ax.transAxes, ha="center")


def save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
