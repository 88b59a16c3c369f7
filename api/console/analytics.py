"""The Spark job's tables, read with DuckDB straight from the warehouse's Parquet files."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import duckdb

from spark_jobs import sink_log

TIME_COLUMNS = ("window_start", "event_time", "at", "detected_at", "ts")


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return int(aware.timestamp() * 1000)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict | list | tuple):
        return str(value)
    return value


def read_table(warehouse: Path, table: str, limit: int) -> dict[str, Any]:
    """The newest ``limit`` rows of ``table`` (newest first): {columns, rows} or {missing}."""
    # what Spark reads (spark_jobs.sink_log), partitioned by tenant: <table>/tenant=<id>/
    folder = warehouse / table
    files = [f for f in sink_log.data_files(folder) if f.is_file()] if folder.is_dir() else []
    if not files:
        return {"table": table, "missing": True, "columns": [], "rows": []}
    con = duckdb.connect()
    try:
        hive = any("=" in f.parent.name for f in files)
        listed = ", ".join("'" + f.as_posix().replace("'", "''") + "'" for f in files)
        source = f"read_parquet([{listed}], hive_partitioning = {str(hive).lower()})"
        # the path is ours (config + a fixed table name), not the request's
        describe = f"DESCRIBE SELECT * FROM {source}"  # noqa: S608
        columns = [r[0] for r in con.execute(describe).fetchall()]
        order = next((c for c in TIME_COLUMNS if c in columns), None)
        sql = f"SELECT * FROM {source}"  # noqa: S608
        if order is not None:
            sql += f' ORDER BY "{order}" DESC'
        rows = con.execute(sql + f" LIMIT {int(limit)}").fetchall()
    finally:
        con.close()
    return {
        "table": table,
        "missing": False,
        "columns": columns,
        "time_column": order,
        "rows": [[_plain(v) for v in row] for row in rows],
    }
