"""The warehouse: Delta tables under one folder, and how readers find them.

Every table is a Delta table (``<table>/_delta_log`` + ``<table>/tenant=<id>/part-*.parquet``)
partitioned by tenant; its log says which files make each version, so a reader sees whole
committed versions only, never a crashed attempt's files or the files a MERGE or an OPTIMIZE
replaced. The streaming job is their one writer (:mod:`spark_jobs.delta_writes`).

A folder of today's earlier layout (a Parquet file sink with its ``_spark_metadata`` log, or a
``device_status`` snapshot link) is still read as Parquet, through that log, until migrated.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs import delta_writes, schemas, sink_log
from spark_jobs.errors import TableMissingError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _has_data(table: Path) -> bool:
    """A Delta table with a committed version, or (the earlier layout) a committed Parquet
    file in the table's folder or its ``tenant=<id>`` partitions.

    For a streaming sink folder only what its log commits counts, as for Spark's reader: a
    folder holding only a killed executor's part files makes ``spark.read.parquet`` fail
    with "Unable to infer schema".
    """
    if delta_writes.is_delta(table):
        return any((table / delta_writes.DELTA_LOG).glob("*.json"))
    return bool(sink_log.data_files(table))


def existing_tables(warehouse: Path) -> dict[str, Path]:
    """Table name -> folder, for every table folder that holds at least one Parquet file."""
    found: dict[str, Path] = {}
    if not warehouse.is_dir():
        return found
    for entry in sorted(warehouse.iterdir()):
        if entry.name.startswith(("_", ".")) or not entry.is_dir() or "." in entry.name:
            continue
        if _has_data(entry):
            found[entry.name] = entry
    return found


def read_table(spark: SparkSession, warehouse: Path, name: str) -> DataFrame:
    path = warehouse / name
    if not path.is_dir() or not _has_data(path):
        raise TableMissingError(f"table {name!r} has no data yet under {warehouse}")
    if delta_writes.is_delta(path):
        return spark.read.format("delta").load(str(path.resolve()))
    return spark.read.parquet(str(path.resolve()))


def register_views(spark: SparkSession, warehouse: Path) -> list[str]:
    """Register every existing table as a temporary view of the same name; returns the names."""
    names = []
    for name in existing_tables(warehouse):
        read_table(spark, warehouse, name).createOrReplaceTempView(name)
        names.append(name)
    return names


def register_tables(spark: SparkSession, warehouse: Path) -> list[str]:
    """Every existing table under its own name, for SQL: a Delta table as a table of the
    session's catalog at its path (so ``VERSION AS OF``, ``TIMESTAMP AS OF``, ``DESCRIBE
    HISTORY`` and ``table_changes`` work, which a temporary view does not allow), a folder of
    the earlier layout as a temporary view. Returns the names."""
    names = []
    for name, path in existing_tables(warehouse).items():
        spark.catalog.dropTempView(name)  # a view of the same name would hide the table
        if delta_writes.is_delta(path):
            quoted = "`" + name.replace("`", "``") + "`"
            location = str(path.resolve()).replace("\\", "\\\\").replace("'", "\\'")
            # external (LOCATION): dropping the entry never touches the files; a session that
            # ran before on another warehouse points at this one afterwards
            spark.sql(f"DROP TABLE IF EXISTS {quoted}")
            spark.sql(f"CREATE TABLE {quoted} USING delta LOCATION '{location}'")
        else:
            read_table(spark, warehouse, name).createOrReplaceTempView(name)
        names.append(name)
    return names


TABLE_DOCS = {
    schemas.DEVICE_MINUTE: "per device and event-time minute: counts, seq gaps/duplicates, stats",
    schemas.FLEET_MINUTE: "per event-time minute: active devices, messages, late, p50/p95",
    schemas.ANOMALIES: "readings far from the device's own recent baseline",
    schemas.DEVICE_STATUS: "per device: last seen, online/offline (snapshot)",
    schemas.REJECTS: "telemetry records that did not parse, with the reason",
}
