"""The warehouse's tables read without Spark: Arrow datasets through each table's log.

A Delta table is read with ``deltalake`` (delta-rs): the files its log lists for the current
version, never a glob (a folder also holds the files a MERGE, an OPTIMIZE or a retention DELETE
replaced until VACUUM removes them). A folder of the earlier layout (a Parquet file sink) is
read through its ``_spark_metadata`` log (:mod:`spark_jobs.sink_log`). DuckDB scans either as
a table (:func:`connect`), in UTC.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs import delta_writes, sink_log
from spark_jobs.errors import TableMissingError

if TYPE_CHECKING:
    import duckdb
    import pyarrow.dataset as pads


def dataset(warehouse: Path, name: str) -> pads.Dataset:
    """The current version of table ``name`` as an Arrow dataset (its ``tenant`` partition
    column included); :class:`TableMissingError` when it has no committed data yet."""
    import pyarrow.dataset as pads
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    folder = warehouse / name
    missing = TableMissingError(f"table {name!r} has no data yet under {warehouse}")
    if delta_writes.is_delta(folder):
        try:
            return DeltaTable(str(folder)).to_pyarrow_dataset()
        except TableNotFoundError:  # a log with no commit yet
            raise missing from None
    files = [f for f in sink_log.data_files(folder) if f.is_file()] if folder.is_dir() else []
    if not files:
        raise missing
    return pads.dataset(
        [str(f) for f in files],
        format="parquet",
        partitioning="hive",
        partition_base_dir=str(folder),
    )


def connect(warehouse: Path, names: tuple[str, ...]) -> tuple[duckdb.DuckDBPyConnection, set[str]]:
    """A DuckDB connection (time zone UTC) with each table of ``names`` that has data
    registered under its own name, and those names (a missing one is left out)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    found = set()
    for name in names:
        try:
            con.register(name, dataset(warehouse, name))
        except TableMissingError:
            continue
        found.add(name)
    return con, found


def columns(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    return [str(row[0]) for row in con.execute(f'DESCRIBE "{name}"').fetchall()]


def table_names(warehouse: Path) -> list[str]:
    """The table folders of the warehouse (not ``_checkpoints`` and the like), sorted."""
    if not warehouse.is_dir():
        return []
    return sorted(
        entry.name
        for entry in warehouse.iterdir()
        if entry.is_dir() and not entry.name.startswith(("_", ".")) and "." not in entry.name
    )
