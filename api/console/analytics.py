"""The Spark job's tables, read with DuckDB: Delta tables through their log (``deltalake``,
delta-rs, no Spark), a folder of the earlier Parquet layout through its sink log."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import duckdb

from spark_jobs import sink_log

DELTA_LOG = "_delta_log"  # a Delta table's transaction log folder
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


def _delta_dataset(folder: Path) -> Any:
    """The current version of the Delta table at ``folder`` as an Arrow dataset (the files
    its log lists, the ``tenant`` partition column included); None before its first commit."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(folder)).to_pyarrow_dataset()
    except TableNotFoundError:
        return None


def read_table(warehouse: Path, table: str, limit: int) -> dict[str, Any]:
    """The newest ``limit`` rows of ``table`` (newest first): {columns, rows} or {missing}."""
    folder = warehouse / table
    missing = {"table": table, "missing": True, "columns": [], "rows": []}
    con = duckdb.connect()
    try:
        if (folder / DELTA_LOG).is_dir():
            dataset = _delta_dataset(folder)
            if dataset is None:
                return missing
            con.register("delta_table", dataset)
            source = "delta_table"
        else:
            # the earlier layout: what Spark reads (spark_jobs.sink_log), <table>/tenant=<id>/
            files = sink_log.data_files(folder) if folder.is_dir() else []
            files = [f for f in files if f.is_file()]
            if not files:
                return missing
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
