"""A warehouse of the earlier layout (Parquet file sinks and a snapshot link) made Delta, in place.

Before the tables were Delta tables the job wrote:

- append tables (device_minute, fleet_minute, anomalies, rejects): Spark file-sink folders,
  ``<table>/tenant=<id>/part-*.parquet`` with the ``_spark_metadata`` log of committed files;
- ``device_status``: a symlink to the newest of ``device_status.versions/batch=<id>/``.

:func:`migrate_warehouse` runs in the streaming job's driver before its queries start (the
tables' one writer). A file-sink folder is converted in place (``CONVERT TO DELTA``, which
takes the files its ``_spark_metadata`` log commits: not a killed attempt's leftovers; no data
file is copied). The snapshot link is replaced by a Delta table holding the snapshot it points
to. The queries then go on from their checkpoints: no Kafka record is read twice or skipped.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs import delta_writes, schemas, sink_log, tenants

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

APPEND_TABLES = (schemas.DEVICE_MINUTE, schemas.FLEET_MINUTE, schemas.ANOMALIES, schemas.REJECTS)


def _convert_sink_folder(spark: SparkSession, table: Path) -> None:
    partitioned = any(table.glob(f"{tenants.TENANT_COLUMN}=*"))
    target = "parquet.`" + str(table.resolve()).replace("`", "``") + "`"
    sql = f"CONVERT TO DELTA {target}"
    if partitioned:
        sql += f" PARTITIONED BY ({tenants.TENANT_COLUMN} STRING)"
    spark.sql(sql)


def _replace_snapshot_link(spark: SparkSession, warehouse: Path, name: str) -> None:
    link = warehouse / name
    versions = warehouse / f"{name}.versions"
    staged = warehouse / f".{name}.delta-migrating"
    if staged.exists():  # a migration killed half-way: start it again
        shutil.rmtree(staged)
    snapshot = spark.read.parquet(str(link.resolve()))
    writer = snapshot.coalesce(1).write.format("delta").mode("overwrite")
    if tenants.TENANT_COLUMN in snapshot.columns:
        writer = writer.partitionBy(tenants.TENANT_COLUMN)
    writer.save(str(staged.resolve()))
    link.unlink()
    staged.rename(link)
    shutil.rmtree(versions, ignore_errors=True)


def migrate_warehouse(spark: SparkSession, warehouse: Path) -> list[str]:
    """Make every table of the earlier layout under ``warehouse`` a Delta table; returns the
    names migrated (none on a Delta warehouse: a second call does nothing)."""
    done: list[str] = []
    for name in APPEND_TABLES:
        table = warehouse / name
        if delta_writes.is_delta(table) or not (table / sink_log.LOG_DIR).is_dir():
            continue
        if not sink_log.committed_files(table):
            # nothing committed yet: the Delta sink starts the table afresh
            shutil.rmtree(table / sink_log.LOG_DIR)
            continue
        log.info("converting %s (Parquet file sink) to a Delta table", table)
        _convert_sink_folder(spark, table)
        done.append(name)
    status = warehouse / schemas.DEVICE_STATUS
    if status.is_symlink():
        log.info("replacing the %s snapshot link by a Delta table", status)
        _replace_snapshot_link(spark, warehouse, schemas.DEVICE_STATUS)
        done.append(schemas.DEVICE_STATUS)
    return done
