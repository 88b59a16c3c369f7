"""The batch fleet report (``iot-analytics report``): uptime, loss, duplicates, noise, anomalies.

Extract (the warehouse tables over a time range, :func:`compute_report`) -> pure transforms
(:func:`device_summary`, :func:`anomaly_counts`) -> load (:func:`write_files`: PNG plots from
``report_plots`` and a Markdown or HTML summary).
"""

from __future__ import annotations

import datetime as dt
import html
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs import report_plots, schemas, tables, tenants
from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import AnalyticsError, TableMissingError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReportRange:
    """What a report covers: a time range of one tenant's fleet (the tables hold every
    tenant's; a report is about one)."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    tenant: str = tenants.DEFAULT_TENANT

    def describe(self) -> str:
        a = self.since.isoformat() if self.since else "the first minute"
        b = self.until.isoformat() if self.until else "the last minute"
        of = "" if self.tenant == tenants.DEFAULT_TENANT else f" of tenant {self.tenant}"
        return f"{a} .. {b}{of}"


def parse_time(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """An ISO time (UTC when no zone is given) or a relative one: ``-2h``, ``-30m``, ``-1d``."""
    now = now or dt.datetime.now(dt.UTC)
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text.startswith("-") and text[-1:] in units and text[1:-1].isdigit():
        return now - dt.timedelta(seconds=int(text[1:-1]) * units[text[-1]])
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise AnalyticsError(f"not a time: {text!r} (ISO 8601 or -30m/-2h/-1d)") from exc
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


# --- transforms ------------------------------------------------------------------------------


def in_range(df: DataFrame, column: str, rng: ReportRange) -> DataFrame:
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

    if tenants.TENANT_COLUMN in df.columns:
        df = df.where(F.col(tenants.TENANT_COLUMN) == F.lit(rng.tenant))
    if rng.since is not None:
        df = df.where(F.col(column) >= F.lit(rng.since))
    if rng.until is not None:
        df = df.where(F.col(column) < F.lit(rng.until))
    return df


def device_summary(device_minute: DataFrame, range_minutes: int, noise_metric: str) -> DataFrame:
    """Per device over the range: uptime, loss and duplicate rates, noise.

    - ``uptime``: minutes with at least one message / ``range_minutes`` (the report passes
      the minutes its data covers, :class:`DataSpan`);
    - ``loss_rate``: seq values between the device's lowest and highest seq that never
      arrived (across minutes, so gaps at minute boundaries count) / that span;
    - ``duplicate_rate``: duplicate records / records received;
    - ``noise``: mean within-minute standard deviation of ``noise_metric``.
    """
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

    agg = device_minute.groupBy("device_id").agg(
        F.count(F.lit(1)).alias("minutes"),
        F.sum("messages").alias("messages"),
        F.sum("distinct_seq").alias("distinct_seq"),
        F.sum("duplicates").alias("duplicates"),
        F.min("first_seq").alias("first_seq"),
        F.max("last_seq").alias("last_seq"),
        F.avg(f"{noise_metric}_std").alias("noise"),
    )
    span = F.col("last_seq") - F.col("first_seq") + 1
    lost = F.greatest(span - F.col("distinct_seq"), F.lit(0))
    return agg.select(
        "device_id",
        "minutes",
        (F.col("minutes") / F.lit(max(range_minutes, 1))).alias("uptime"),
        "messages",
        "duplicates",
        (F.col("duplicates") / F.col("messages")).alias("duplicate_rate"),
        lost.cast("long").alias("lost"),
        (lost / span).alias("loss_rate"),
        "noise",
    )


def anomaly_counts(anomalies: DataFrame) -> DataFrame:
    """Per device: anomalous readings, and the metric most often anomalous."""
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

    per_metric = anomalies.groupBy("device_id", "metric").agg(F.count(F.lit(1)).alias("n"))
    return per_metric.groupBy("device_id").agg(
        F.sum("n").alias("anomalies"), F.max_by("metric", "n").alias("top_metric")
    )


# --- extract ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataSpan:
    """The minutes a report measures: the requested range clipped to the data, i.e. from the
    first minute with data from any device to the end of the last one. Uptime is measured over
    these minutes and the plots' time axes span them, so a short run is judged on its own
    minutes, not on the empty rest of the range."""

    start: dt.datetime
    end: dt.datetime

    @property
    def minutes(self) -> int:
        return max(1, int((self.end - self.start).total_seconds() // 60))


@dataclass(frozen=True)
class FleetReport:
    """What the report shows, computed; :func:`write_files` renders it."""

    requested: ReportRange
    span: DataSpan
    devices: Any  # pandas: one row per device (device_summary + anomaly counts)
    fleet: Any  # pandas: fleet_minute rows of the span, by minute
    noise_metric: str


def compute_report(
    spark: SparkSession, cfg: AnalyticsConfig, rng: ReportRange, *, noise_metric: str
) -> FleetReport:
    """Read the tables over ``rng`` and compute the per-device summary and fleet series."""
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

    wh = cfg.warehouse_dir
    dm = in_range(tables.read_table(spark, wh, schemas.DEVICE_MINUTE), "window_start", rng)
    fm = in_range(tables.read_table(spark, wh, schemas.FLEET_MINUTE), "window_start", rng)
    try:
        an = in_range(tables.read_table(spark, wh, schemas.ANOMALIES), "event_time", rng)
    except TableMissingError:
        an = None
    if f"{noise_metric}_std" not in dm.columns:
        metrics = sorted(c[: -len("_std")] for c in dm.columns if c.endswith("_std"))
        raise AnalyticsError(f"no metric {noise_metric!r} in device_minute (has: {metrics})")
    bounds = dm.agg(F.min("window_start").alias("a"), F.max("window_end").alias("b")).first()
    if bounds is None or bounds["a"] is None:
        raise AnalyticsError(f"no device_minute rows in {rng.describe()}")
    # minutes are selected by their start, so the data's bounds already lie inside the range
    span = DataSpan(bounds["a"].replace(tzinfo=dt.UTC), bounds["b"].replace(tzinfo=dt.UTC))

    summary = device_summary(dm, span.minutes, noise_metric)
    if an is not None:
        summary = summary.join(anomaly_counts(an), "device_id", "left")
    else:
        summary = summary.withColumn("anomalies", F.lit(0)).withColumn(
            "top_metric", F.lit(None).cast("string")
        )
    devices = summary.fillna({"anomalies": 0}).orderBy("device_id").toPandas()
    fleet = fm.orderBy("window_start").toPandas()
    return FleetReport(rng, span, devices, fleet, noise_metric)


# --- load ------------------------------------------------------------------------------------


def _table_md(rows: list[dict[str, Any]], cols: list[str]) -> str:
    if not rows:
        return "_none_\n"
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def write_report(
    spark: SparkSession,
    cfg: AnalyticsConfig,
    out_dir: Path,
    rng: ReportRange,
    *,
    fmt: str = "md",
    top: int = 10,
    noise_metric: str = "temperature",
) -> Path:
    """Compute the report and write it (plus PNGs) into ``out_dir``; returns the summary path."""
    report = compute_report(spark, cfg, rng, noise_metric=noise_metric)
    return write_files(report, out_dir, fmt=fmt, top=top)


def _most_anomalous(devices: Any, top: int) -> Any:
    ranked = devices.sort_values(["anomalies", "device_id"], ascending=[False, True]).head(top)
    return ranked[ranked["anomalies"] > 0]


def figures(report: FleetReport, top: int) -> list[tuple[str, Figure]]:
    """The report's plots by file stem; time axes span ``report.span``."""
    fleet, span, metric = report.fleet, report.span, report.noise_metric
    return [
        ("fleet_messages", report_plots.fleet_traffic(fleet, span.start, span.end)),
        ("fleet_percentiles", report_plots.fleet_percentiles(fleet, span.start, span.end, metric)),
        ("uptime", report_plots.uptime_histogram(report.devices)),
        ("anomalies", report_plots.top_anomalies(_most_anomalous(report.devices, top), top)),
    ]


def write_files(report: FleetReport, out_dir: Path, *, fmt: str = "md", top: int = 10) -> Path:
    """The summary (Markdown or HTML), the PNG plots and devices.csv; returns the summary path."""
    devices, span, metric = report.devices, report.span, report.noise_metric
    out_dir.mkdir(parents=True, exist_ok=True)
    anomalous = _most_anomalous(devices, top)
    plots = [report_plots.save(fig, out_dir / f"{name}.png") for name, fig in figures(report, top)]
    noisiest = devices.sort_values(["noise", "device_id"], ascending=[False, True]).head(top)
    totals = {
        "devices": len(devices),
        "minutes in range": span.minutes,
        "messages": int(devices["messages"].sum()),
        "duplicates": int(devices["duplicates"].sum()),
        "lost (seq gaps)": int(devices["lost"].sum()),
        "anomalies": int(devices["anomalies"].sum()),
        "mean uptime": float(devices["uptime"].mean()),
    }
    cols = ["device_id", "uptime", "messages", "loss_rate", "duplicate_rate", "noise", "anomalies"]
    sections = [
        ("Totals", [totals], list(totals)),
        (f"Noisiest devices ({metric}, mean within-minute std)", _rows(noisiest), cols),
        ("Most anomalous devices", _rows(anomalous), [*cols, "top_metric"]),
        (
            "Lowest uptime",
            _rows(devices.sort_values(["uptime", "device_id"]).head(top)),
            cols,
        ),
        (
            "Highest loss",
            _rows(
                devices.sort_values(["loss_rate", "device_id"], ascending=[False, True]).head(top)
            ),
            cols,
        ),
    ]
    title = f"Fleet report {span.start:%Y-%m-%d %H:%M} .. {span.end:%Y-%m-%d %H:%M} UTC"
    note = (
        f"Requested range: {report.requested.describe()}. Data from {span.start:%Y-%m-%d %H:%M}"
        f" to {span.end:%Y-%m-%d %H:%M} UTC ({span.minutes} minutes): uptime is the share of"
        " these minutes in which the device sent data."
    )
    if fmt == "html":
        path = out_dir / "report.html"
        path.write_text(_html(title, note, sections, plots))
    else:
        path = out_dir / "report.md"
        path.write_text(_markdown(title, note, sections, plots))
    devices.to_csv(out_dir / "devices.csv", index=False)
    log.info("report written to %s", path)
    return path


def _rows(pdf: Any) -> list[dict[str, Any]]:
    return [{k: (None if _isnan(v) else v) for k, v in r.items()} for r in pdf.to_dict("records")]


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and v != v  # noqa: PLR0124 (NaN test)


def _markdown(title: str, note: str, sections: list[Any], plots: list[Path]) -> str:
    parts = [f"# {title}\n", f"{note}\n"]
    for name, rows, cols in sections:
        parts.append(f"## {name}\n\n{_table_md(rows, cols)}")
    parts.append("## Plots\n")
    parts += [f"![{p.stem}]({p.name})\n" for p in plots]
    return "\n".join(parts)


def _html(title: str, note: str, sections: list[Any], plots: list[Path]) -> str:
    body = [f"<h1>{html.escape(title)}</h1><p>{html.escape(note)}</p>"]
    for name, rows, cols in sections:
        body.append(f"<h2>{html.escape(name)}</h2><table border=1 cellspacing=0 cellpadding=3>")
        body.append("<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
        for r in rows:
            cells = "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in cols)
            body.append(f"<tr>{cells}</tr>")
        body.append("</table>")
    body += [f'<h2>{html.escape(p.stem)}</h2><img src="{p.name}">' for p in plots]
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"</head><body>{''.join(body)}</body></html>\n"
    )
