"""``iot-analytics sql``: Spark SQL over the warehouse tables (registered as views)."""

from __future__ import annotations

import io
from typing import Any

from spark_jobs import tables
from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import TableMissingError


def run_query(cfg: AnalyticsConfig, query: str, *, max_rows: int | None = 1000) -> Any:
    """Run ``query`` with every table registered as a view; returns a pandas DataFrame."""
    from spark_jobs.session import build_session, owns_session

    owned = owns_session()
    spark = build_session(cfg, "iot-analytics-sql", kafka=False)
    try:
        names = tables.register_views(spark, cfg.warehouse_dir)
        if not names:
            raise TableMissingError(
                f"no tables under {cfg.warehouse_dir} yet (is `iot-analytics stream` running?)"
            )
        df = spark.sql(query)
        if max_rows is not None:
            df = df.limit(max_rows)
        return df.toPandas()
    finally:
        if owned:
            spark.stop()


def render(pdf: Any, fmt: str) -> str:
    """The query result as an aligned text table, CSV or JSON lines."""
    if fmt == "csv":
        buf = io.StringIO()
        pdf.to_csv(buf, index=False)
        return buf.getvalue()
    if fmt == "json":
        return pdf.to_json(orient="records", lines=True, date_format="iso") + "\n"
    if pdf.empty:
        return "(no rows)\n" if len(pdf.columns) == 0 else " | ".join(pdf.columns) + "\n(no rows)\n"
    return pdf.to_string(index=False) + "\n"
