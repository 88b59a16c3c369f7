"""The fleet report over a short run: uptime and plot axes follow the data, not the range."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from matplotlib import dates as mdates

from spark_jobs import report, transforms
from spark_jobs.config import AnalyticsConfig
from tests.spark_jobs.frames import T0, at, kafka_frame, kafka_row, telemetry

pytestmark = pytest.mark.spark
MINUTE = dt.timedelta(minutes=1)


def _warehouse(spark: Any, wh: Path, minutes_of: dict[str, list[int]]) -> None:
    """device_minute and fleet_minute of devices sending 3 messages in each listed minute."""
    rows = []
    for device, minutes in minutes_of.items():
        seq = 0
        for minute in minutes:
            for second in (5, 25, 45):
                seq += 1
                ms = at(minute, second)
                rows.append(kafka_row(device, telemetry(seq, ms, t=20.0 + seq), received_at=ms))
    valid = transforms.valid_telemetry(transforms.parse_telemetry(kafka_frame(spark, rows)))
    transforms.device_minute(valid, ["t"]).write.parquet(str(wh / "device_minute"))
    transforms.fleet_minute(valid, ["t"]).write.parquet(str(wh / "fleet_minute"))


def _xlim(fig: Any) -> list[dt.datetime]:
    [ax] = fig.axes
    return list(mdates.num2date(ax.get_xlim(), tz=dt.UTC))


def test_one_minute_run(spark: Any, spark_config: AnalyticsConfig, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    _warehouse(spark, wh, {"a": [0], "b": [0]})
    cfg = dataclasses.replace(spark_config, warehouse_dir=wh)
    since = report.parse_time(
        "-2h", now=T0 + 30 * MINUTE
    )  # as `report --since -2h` half an hour on
    rng = report.ReportRange(since=since)

    fleet = report.compute_report(cfg, rng, noise_metric="t")
    assert (fleet.span.start, fleet.span.end, fleet.span.minutes) == (T0, T0 + MINUTE, 1)
    assert dict(zip(fleet.devices["device_id"], fleet.devices["uptime"], strict=True)) == {
        "a": 1.0,
        "b": 1.0,
    }  # not 1 / 120 minutes of the requested range
    plots = dict(report.figures(fleet, top=10))
    for name in ("fleet_messages", "fleet_percentiles"):
        assert _xlim(plots[name]) == [T0, T0 + MINUTE], name  # not four years
    fig: Any = plots["fleet_messages"]
    messages = next(line for line in fig.axes[0].lines if line.get_label() == "messages / minute")
    assert [float(y) for y in messages.get_ydata()] == [6.0, 6.0]

    path = report.write_files(fleet, tmp_path / "out")
    summary = path.read_text()
    assert "| 2 | 1 | 6 | 0 | 0 | 0 | 1 |" in summary  # devices, minutes, ..., mean uptime
    assert "(1 minutes): uptime is the share of these minutes" in summary
    assert f"Requested range: {since.isoformat()} .. the last minute." in summary
    with (tmp_path / "out" / "devices.csv").open() as f:
        assert {r["device_id"]: float(r["uptime"]) for r in csv.DictReader(f)} == {
            "a": 1.0,
            "b": 1.0,
        }


def test_uptime_counts_the_fleets_minutes(
    spark: Any, spark_config: AnalyticsConfig, tmp_path: Path
) -> None:
    # a sends in minutes 0..4, b only in minute 0 and then goes silent, c joins in minute 3
    wh = tmp_path / "wh"
    _warehouse(spark, wh, {"a": [0, 1, 2, 3, 4], "b": [0], "c": [3, 4]})
    cfg = dataclasses.replace(spark_config, warehouse_dir=wh)
    rng = report.ReportRange(since=T0 - 60 * MINUTE, until=T0 + 60 * MINUTE)
    fleet = report.compute_report(cfg, rng, noise_metric="t")
    assert (fleet.span.start, fleet.span.minutes) == (T0, 5)
    uptime = dict(zip(fleet.devices["device_id"], fleet.devices["uptime"], strict=True))
    assert uptime == pytest.approx({"a": 1.0, "b": 0.2, "c": 0.4})
    plots = dict(report.figures(fleet, top=10))
    assert _xlim(plots["fleet_messages"]) == [T0, T0 + 5 * MINUTE]
