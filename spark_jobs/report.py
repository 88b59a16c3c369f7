"""The batch fleet report (``iot-analytics report``): uptime, loss, duplicates, noise, anomalies.

Extract (the warehouse tables over a time range, read through their Delta logs with delta-rs:
:mod:`spark_jobs.lake`, no Spark) -> transforms in DuckDB (:func:`device_summary`,
:func:`anomaly_counts`) -> load (:func:`write_files`: PNG plots from ``report_plots`` and a
Markdown or HTML summary).
"""

from __future__ import annotations

import datetime as dt
import html
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs import lake, report_plots, tenants
from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import AnalyticsError, TableMissingError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

# schemas' table names (config.TABLE_NAMES: schemas imports pyspark, which the report does not)
DEVICE_MINUTE, FLEET_MINUTE, ANOMALIES = "device_minute", "fleet_minute", "anomalies"


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


# --- transforms (DuckDB SQL over Arrow or pandas tables) --------------------------------------


def _sql(query: str, params: list[Any] | None = None, **tables: Any) -> Any:
    """``query`` on a fresh UTC DuckDB connection with ``tables`` registered by name, as
    pandas (time columns naive UTC, as Spark's ``toPandas`` gave them)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        for name, table in tables.items():
            con.register(name, table)
        return _naive_utc(con.execute(query, params or []).df())
    finally:
        con.close()


def _naive_utc(pdf: Any) -> Any:
    for column in pdf.columns:
        if getattr(pdf[column].dtype, "tz", None) is not None:
            pdf[column] = pdf[column].dt.tz_convert("UTC").dt.tz_localize(None)
    return pdf


def device_summary(device_minute: Any, range_minutes: int, noise_metric: str) -> Any:
    """Per device over the range (``device_minute``: an Arrow or pandas table), as pandas:

    - ``uptime``: minutes with at least one message / ``range_minutes`` (the report passes
      the minutes its data covers, :class:`DataSpan`);
    - ``loss_rate``: seq values between the device's lowest and highest seq that never
      arrived (across minutes, so gaps at minute boundaries count) / that span;
    - ``duplicate_rate``: duplicate records / records received;
    - ``noise``: mean within-minute standard deviation of ``noise_metric``.
    """
    noise = '"' + f"{noise_metric}_std".replace('"', '""') + '"'
    return _sql(
        f"""
        WITH agg AS (
            SELECT device_id, count(*) AS minutes, CAST(sum(messages) AS BIGINT) AS messages,
                   CAST(sum(distinct_seq) AS BIGINT) AS distinct_seq,
                   CAST(sum(duplicates) AS BIGINT) AS duplicates,
                   min(first_seq) AS first_seq, max(last_seq) AS last_seq,
                   avg({noise}) AS noise
            FROM dm GROUP BY device_id
        ), spans AS (
            SELECT *, last_seq - first_seq + 1 AS span,
                   greatest(last_seq - first_seq + 1 - distinct_seq, 0) AS lost
            FROM agg
        )
        SELECT device_id, minutes, minutes / CAST(? AS DOUBLE) AS uptime, messages, duplicates,
               duplicates / CAST(messages AS DOUBLE) AS duplicate_rate,
               CAST(lost AS BIGINT) AS lost, lost / CAST(span AS DOUBLE) AS loss_rate, noise
        FROM spans ORDER BY device_id
        """,  # noqa: S608 (the column name is quoted; the range is a parameter)
        [max(range_minutes, 1)],
        dm=device_minute,
    )


def anomaly_counts(anomalies: Any) -> Any:
    """Per device: anomalous readings, and the metric most often anomalous (pandas)."""
    return _sql(
        """
        WITH per_metric AS (
            SELECT device_id, metric, count(*) AS n FROM an GROUP BY device_id, metric
        )
        SELECT device_id, CAST(sum(n) AS BIGINT) AS anomalies, arg_max(metric, n) AS top_metric
        FROM per_metric GROUP BY device_id ORDER BY device_id
        """,
        an=anomalies,
    )


def in_range(table: Any, column: str, rng: ReportRange) -> Any:
    """The rows of ``table`` (Arrow dataset) of ``rng``'s tenant and time range, as Arrow."""
    names = set(table.schema.names)
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if tenants.TENANT_COLUMN in names:
        where.append(f'"{tenants.TENANT_COLUMN}" = ?')
        params.append(rng.tenant)
    if rng.since is not None:
        where.append(f'CAST("{column}" AS TIMESTAMPTZ) >= ?')  # a naive time is UTC
        params.append(rng.since)
    if rng.until is not None:
        where.append(f'CAST("{column}" AS TIMESTAMPTZ) < ?')
        params.append(rng.until)
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.register("t", table)
        query = f'SELECT * FROM t WHERE {" AND ".join(where)} ORDER BY "{column}"'  # noqa: S608
        return con.sql(query, params=params).to_arrow_table()
    finally:
        con.close()


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


def compute_report(cfg: AnalyticsConfig, rng: ReportRange, *, noise_metric: str) -> FleetReport:
    """Read the tables over ``rng`` (delta-rs + DuckDB: no Spark) and compute the per-device
    summary and fleet series."""
    wh = cfg.warehouse_dir
    dm = in_range(lake.dataset(wh, DEVICE_MINUTE), "window_start", rng)
    fm = in_range(lake.dataset(wh, FLEET_MINUTE), "window_start", rng)
    try:
        an = in_range(lake.dataset(wh, ANOMALIES), "event_time", rng)
    except TableMissingError:
        an = None
    if f"{noise_metric}_std" not in dm.schema.names:
        metrics = sorted(c[: -len("_std")] for c in dm.schema.names if c.endswith("_std"))
        raise AnalyticsError(f"no metric {noise_metric!r} in device_minute (has: {metrics})")
    if dm.num_rows == 0:
        raise AnalyticsError(f"no device_minute rows in {rng.describe()}")
    bounds = _sql("SELECT min(window_start) AS a, max(window_end) AS b FROM dm", dm=dm)
    # minutes are selected by their start, so the data's bounds already lie inside the range
    start, end = (bounds[c][0].to_pydatetime().replace(tzinfo=dt.UTC) for c in ("a", "b"))
    span = DataSpan(start, end)

    devices = device_summary(dm, span.minutes, noise_metric)
    if an is not None and an.num_rows:
        devices = devices.merge(anomaly_counts(an), on="device_id", how="left")
        devices["anomalies"] = devices["anomalies"].fillna(0).astype("int64")
    else:
        devices["anomalies"] = 0
        devices["top_metric"] = None
    fleet = _naive_utc(fm.to_pandas())
    return FleetReport(
        rng, span, devices.sort_values("device_id", ignore_index=True), fleet, noise_metric
    )


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
    cfg: AnalyticsConfig,
    out_dir: Path,
    rng: ReportRange,
    *,
    fmt: str = "md",
    top: int = 10,
    noise_metric: str = "temperature",
) -> Path:
    """Compute the report and write it (plus PNGs) into ``out_dir``; returns the summary path."""
    report = compute_report(cfg, rng, noise_metric=noise_metric)
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
