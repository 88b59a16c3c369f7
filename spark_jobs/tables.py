"""The warehouse: Parquet tables under one folder, and how readers find them.

Every table is partitioned by tenant (``<table>/tenant=<id>/part-*.parquet``); Spark's readers
give the folder name back as the ``tenant`` column.

Append tables (device_minute, fleet_minute, anomalies, rejects) are Spark file-sink folders:
the ``_spark_metadata`` log lists the committed files, which is what makes the streaming
writes exactly-once for Spark readers. ``device_status`` is a current-state table: each
micro-batch writes a full snapshot to ``device_status.versions/batch=<id>`` and then swaps the
``device_status`` symlink to it atomically, so readers always see one whole snapshot.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs import schemas, sink_log, tenants
from spark_jobs.errors import TableMissingError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

KEEP_SNAPSHOTS = 3


def _has_data(table: Path) -> bool:
    """A committed Parquet file in the table's folder or its ``tenant=<id>`` partitions.

    For a streaming sink folder only what its log commits counts, as for Spark's reader: a
    folder holding only a killed executor's part files makes ``spark.read.parquet`` fail
    with "Unable to infer schema".
    """
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
    return spark.read.parquet(str(path.resolve()))


def register_views(spark: SparkSession, warehouse: Path) -> list[str]:
    """Register every existing table as a temporary view of the same name; returns the names."""
    names = []
    for name in existing_tables(warehouse):
        read_table(spark, warehouse, name).createOrReplaceTempView(name)
        names.append(name)
    return names


def publish_snapshot(df: DataFrame, warehouse: Path, name: str, batch_id: int) -> Path:
    """Write ``df`` as the new whole content of table ``name``, idempotently per batch id.

    Replaying the same ``batch_id`` (after a crash) rewrites the same version folder and
    re-points the link: the table never holds two snapshots at once.
    """
    versions = warehouse / f"{name}.versions"
    target = versions / f"batch={batch_id:012d}"
    writer = df.coalesce(1).write.mode("overwrite")
    if tenants.TENANT_COLUMN in df.columns:  # one file per tenant, as the append tables
        writer = writer.partitionBy(tenants.TENANT_COLUMN)
    writer.parquet(str(target.resolve()))
    link = warehouse / name
    if link.exists() and not link.is_symlink():
        shutil.rmtree(link)
    tmp = warehouse / f".{name}.link-tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target, warehouse), tmp)
    os.replace(tmp, link)
    old = sorted(p for p in versions.iterdir() if p.name.startswith("batch=") and p != target)
    for stale in old[:-KEEP_SNAPSHOTS] if len(old) > KEEP_SNAPSHOTS else []:
        shutil.rmtree(stale, ignore_errors=True)
    log.debug("published %s batch %d", name, batch_id)
    return target


TABLE_DOCS = {
    schemas.DEVICE_MINUTE: "per device and event-time minute: counts, seq gaps/duplicates, stats",
    schemas.FLEET_MINUTE: "per event-time minute: active devices, messages, late, p50/p95",
    schemas.ANOMALIES: "readings far from the device's own recent baseline",
    schemas.DEVICE_STATUS: "per device: last seen, online/offline (snapshot)",
    schemas.REJECTS: "telemetry records that did not parse, with the reason",
}
