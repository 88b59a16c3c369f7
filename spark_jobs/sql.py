"""``iot-analytics sql``: Spark SQL over the warehouse tables.

The Delta tables are registered in the session's catalog at their paths
(:func:`spark_jobs.tables.register_tables`), so time travel (``VERSION AS OF n``,
``TIMESTAMP AS OF '...'``) and the change data feed (``table_changes('device_minute', 3)``)
work on them by name. ``--engine duckdb`` runs DuckDB's SQL over the tables' current versions
read with delta-rs instead (no Spark; no time travel). A query either engine refuses (a
missing table, a version the table does not have, bad SQL) is a :class:`QueryError` with a
one-line message.
"""

from __future__ import annotations

import io
from typing import Any

from spark_jobs import lake
from spark_jobs.config import AnalyticsConfig
from spark_jobs.errors import QueryError, TableMissingError

ENGINES = ("spark", "duckdb")


def run_query(
    cfg: AnalyticsConfig, query: str, *, max_rows: int | None = 1000, engine: str = "spark"
) -> Any:
    """Run ``query`` with every table registered under its name; returns a pandas DataFrame.
    ``engine``: Spark SQL (time travel, the change feed), or DuckDB over the tables' current
    versions read with delta-rs (:func:`run_duckdb`: no Spark)."""
    if engine == "duckdb":
        return run_duckdb(cfg, query, max_rows=max_rows)
    from spark_jobs import tables
    from spark_jobs.session import build_session, owns_session

    owned = owns_session()
    spark = build_session(cfg, "iot-analytics-sql", kafka=False)
    try:
        names = tables.register_tables(spark, cfg.warehouse_dir)
        if not names:
            raise TableMissingError(
                f"no tables under {cfg.warehouse_dir} yet (is `iot-analytics stream` running?)"
            )
        try:
            df = spark.sql(query)
            if max_rows is not None:
                df = df.limit(max_rows)
            return df.toPandas()
        except Exception as exc:
            message = refusal(exc)
            if message is None:
                raise
            raise QueryError(message) from None
    finally:
        if owned:
            spark.stop()


def run_duckdb(cfg: AnalyticsConfig, query: str, *, max_rows: int | None = 1000) -> Any:
    """``query`` in DuckDB's SQL (time zone UTC) over each table's current version, read
    through its Delta log with delta-rs; no JVM. A query DuckDB refuses is a
    :class:`QueryError` with its first line."""
    import duckdb

    con, found = lake.connect(cfg.warehouse_dir, tuple(lake.table_names(cfg.warehouse_dir)))
    try:
        if not found:
            raise TableMissingError(
                f"no tables under {cfg.warehouse_dir} yet (is `iot-analytics stream` running?)"
            )
        try:
            rel = con.sql(query)
            if rel is None:  # a statement with no result (SET ...)
                return _empty()
            if max_rows is not None:
                rel = rel.limit(max_rows)
            pdf = _bigint_sums(rel).df()
        except duckdb.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raise QueryError(lines[0] if lines else type(exc).__name__) from None
    finally:
        con.close()
    for column in pdf.columns:  # naive UTC, as Spark's toPandas gives times
        if getattr(pdf[column].dtype, "tz", None) is not None:
            pdf[column] = pdf[column].dt.tz_convert("UTC").dt.tz_localize(None)
    return pdf


def _bigint_sums(rel: Any) -> Any:
    """``rel`` with its HUGEINT columns (DuckDB's ``sum`` of integers) as BIGINT, which pandas
    holds as int64 (Spark's ``sum`` is a bigint too) rather than as float."""
    if not any(str(t) == "HUGEINT" for t in rel.types):
        return rel
    quoted = ['"' + c.replace('"', '""') + '"' for c in rel.columns]
    return rel.project(
        ", ".join(
            f"CAST({q} AS BIGINT) AS {q}" if str(t) == "HUGEINT" else q
            for q, t in zip(quoted, rel.types, strict=True)
        )
    )


def _empty() -> Any:
    import pandas as pd

    return pd.DataFrame()


def refusal(exc: BaseException) -> str | None:
    """The first line of a refused query's error (no JVM stack trace), or None when ``exc``
    is not a refusal. A Delta error reaching Python unconverted (a ``Py4JJavaError``) is
    judged by its Java exception: a time travel out of range is ``VersionNotFoundException``
    or ``DeltaAnalysisException`` there."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"AnalysisException", "ParseException", "IllegalArgumentException"}:
        text = str(exc)
    elif "Py4JJavaError" in names:
        java = getattr(exc, "java_exception", None)
        java_name = str(java.getClass().getName()) if java is not None else ""
        if not java_name.endswith(("AnalysisException", "VersionNotFoundException")):
            return None
        text = str(java.getMessage()) if java is not None else str(exc)
    else:
        return None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


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
