"""The Spark job's tables, read with DuckDB straight from the warehouse's Parquet files."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import duckdb

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
    folder = warehouse / table
    # the Spark job partitions its tables by tenant: <table>/tenant=<id>/*.parquet
    flat = any(folder.glob("*.parquet")) if folder.is_dir() else False
    if not flat and not (folder.is_dir() and any(folder.glob("*=*/*.parquet"))):
        return {"table": table, "missing": True, "columns": [], "rows": []}
    con = duckdb.connect()
    try:
        files = (folder / ("*.parquet" if flat else "*=*/*.parquet")).as_posix()
        source = f"read_parquet('{files}', hive_partitioning = {str(not flat).lower()})"
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
