"""The streaming job's writes into Delta tables that a stream's own sink cannot make.

The append tables (anomalies, rejects) are written by Delta's streaming sink itself. The
windowed aggregates (device_minute, fleet_minute) run in *update* mode: every micro-batch
hands :func:`merge_batch` the windows it changed, which are MERGEd into the table by key, so
a reading arriving after its minute was first written updates that minute's row, never adds a
second one. ``device_status`` is a whole snapshot per batch (:func:`overwrite_batch`).

Exactly-once: each write carries Delta's transaction id, ``txnAppId`` (the table and the
query's id, read from its checkpoint) and ``txnVersion`` (the batch id). Delta records the
pair in the table's log and skips a write whose version it has already committed for that
app id, so a batch replayed after a crash (kill -9 between the MERGE's commit and the
checkpoint's) changes nothing. A new checkpoint is a new query id and so a new app id, as
Delta requires (an old app id would skip every batch id it has seen).

Upkeep (:class:`Upkeep`): every ``interval_s`` a table's rows past their retention are deleted
(:mod:`spark_jobs.retention`), the table compacted (``OPTIMIZE``, Z-ordered by device where a
device's rows are read together) and vacuumed (``VACUUM ... RETAIN n HOURS``) by the query that
writes it, right after one of its batches: never beside its own writes. Between two upkeeps a
table that wrote more than ``max_files_per_day`` files today is compacted at once.

One writer: these run in the streaming job's driver only (docs/analytics.md).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs import tenants
from spark_jobs.delta_conf import CHANGE_FEED
from spark_jobs.retention import Retention, over_bound

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

DELTA_LOG = "_delta_log"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def is_delta(table: Path) -> bool:
    """A Delta table: its folder has a transaction log."""
    return (table / DELTA_LOG).is_dir()


def query_id(checkpoint: Path) -> str:
    """The id a streaming query keeps across restarts, from its checkpoint's ``metadata``
    file (Spark writes it before the first batch runs)."""
    text = (checkpoint / "metadata").read_text(encoding="utf-8")
    return str(json.loads(text.splitlines()[0])["id"])


def app_id(table: str, checkpoint: Path) -> str:
    return f"iot-analytics/{table}/{query_id(checkpoint)}"


def _quoted(path: Path) -> str:
    return "delta.`" + str(path.resolve()).replace("`", "``") + "`"


def enable_change_feed(spark: SparkSession, warehouse: Path) -> list[str]:
    """Turn the change data feed on for the warehouse's Delta tables that lack it (made before
    it was the job's default, or migrated); returns their names. The feed covers the versions
    from then on: ``table_changes`` of an earlier version is refused."""
    turned_on = []
    folders = sorted(warehouse.iterdir()) if warehouse.is_dir() else []
    for table in (folder for folder in folders if is_delta(folder)):
        props = spark.sql(f"SHOW TBLPROPERTIES {_quoted(table)}").collect()
        if {str(row[0]): str(row[1]) for row in props}.get(CHANGE_FEED) == "true":
            continue
        spark.sql(f"ALTER TABLE {_quoted(table)} SET TBLPROPERTIES ({CHANGE_FEED} = true)")
        turned_on.append(table.name)
    return turned_on


def append_batch(batch: DataFrame, table: Path, app: str, batch_id: int) -> None:
    """Append ``batch`` to the Delta table at ``table`` (partitioned by tenant), once per
    (``app``, ``batch_id``)."""
    (
        batch.write.format("delta")
        .mode("append")
        .partitionBy(tenants.TENANT_COLUMN)
        .option("txnAppId", app)
        .option("txnVersion", str(batch_id))
        .save(str(table.resolve()))
    )


def merge_batch(
    batch: DataFrame, table: Path, keys: Sequence[str], app: str, batch_id: int
) -> None:
    """Upsert ``batch`` (one row per key) into the Delta table at ``table`` by ``keys``,
    idempotently per (``app``, ``batch_id``); creates the table, partitioned by tenant, from
    the first batch."""
    if not is_delta(table):
        append_batch(batch, table, app, batch_id)
        return
    session = batch.sparkSession  # the query's own clone: its settings are not the others'
    view = f"_merge_{table.name}"
    batch.createOrReplaceTempView(view)
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    session.conf.set(TXN_APP_ID, app)
    session.conf.set(TXN_VERSION, str(batch_id))
    try:
        session.sql(
            f"MERGE INTO {_quoted(table)} t USING {view} s ON {on} "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
    finally:
        session.conf.unset(TXN_APP_ID)
        session.conf.unset(TXN_VERSION)
        session.catalog.dropTempView(view)


def overwrite_batch(batch: DataFrame, table: Path, app: str, batch_id: int) -> None:
    """Replace the whole content of the Delta table at ``table`` by ``batch`` (one version per
    batch: readers see the old snapshot or the new one), idempotently per batch id."""
    writer = (
        batch.coalesce(1)
        .write.format("delta")
        .mode("overwrite")
        .option("txnAppId", app)
        .option("txnVersion", str(batch_id))
    )
    if tenants.TENANT_COLUMN in batch.columns:  # one file per tenant, as the other tables
        writer = writer.partitionBy(tenants.TENANT_COLUMN)
    writer.save(str(table.resolve()))
    log.debug("overwrote %s with batch %d", table.name, batch_id)


@dataclass
class Upkeep:
    """When each table is next aged, compacted and vacuumed, and how (one per job)."""

    interval_s: float  # 0: never
    retention_hours: int
    zorder: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rows: Retention = field(default_factory=Retention)  # the rows' retention (DELETE)
    max_files_per_day: int = 0  # compact between upkeeps past this many files today (0: never)
    bound_check_s: float = 60.0  # how often a table's files are counted against that bound
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict)
    _counted: dict[str, float] = field(default_factory=dict)

    def due(self, name: str) -> bool:
        """True once ``interval_s`` has passed since the table's last upkeep (or since the
        job started: a restart does not compact at once)."""
        if self.interval_s <= 0:
            return False
        now = self.clock()
        return now - self._last.setdefault(name, now) >= self.interval_s

    def statements(self, table: Path, now: dt.datetime | None = None) -> list[str]:
        """DELETE the rows past their retention, OPTIMIZE, VACUUM (``now``: UTC clock)."""
        when = dt.datetime.now(dt.UTC) if now is None else now
        deletes = self.rows.delete_statements(table.name, _quoted(table), when)
        return [
            *deletes,
            self._optimize(table),
            f"VACUUM {_quoted(table)} RETAIN {int(self.retention_hours)} HOURS",
        ]

    def _optimize(self, table: Path) -> str:
        optimize = f"OPTIMIZE {_quoted(table)}"
        if columns := self.zorder.get(table.name):
            optimize += " ZORDER BY (" + ", ".join(f"`{c}`" for c in columns) + ")"
        return optimize

    def run(self, session: SparkSession, table: Path) -> None:
        """Age, compact, then vacuum the table at ``table`` (from its writer's batch)."""
        started = self.clock()
        if is_delta(table):
            for sql in self.statements(table):
                session.sql(sql).collect()
        self._last[table.name] = self.clock()
        log.info(
            "upkeep of %s: DELETE + OPTIMIZE + VACUUM in %.1f s", table.name, self.clock() - started
        )

    def over_bound(self, table: Path) -> bool:
        """The table wrote more than ``max_files_per_day`` files today (counted from its log
        at most every ``bound_check_s``)."""
        if self.max_files_per_day <= 0:
            return False
        now = self.clock()
        if now - self._counted.get(table.name, -self.bound_check_s) < self.bound_check_s:
            return False
        self._counted[table.name] = now
        files = files_of(table)
        return files is not None and over_bound(files.today, self.max_files_per_day)

    def after_batch(self, session: SparkSession, table: Path) -> None:
        """The upkeep when due; else a compaction if today's files passed their bound."""
        if self.due(table.name):
            self.run(session, table)
        elif self.over_bound(table):
            log.info("%s passed %d files today: compacting", table.name, self.max_files_per_day)
            # bin-packing only: a Z-order would rewrite every file of the table each time
            session.sql(f"OPTIMIZE {_quoted(table)}").collect()


@dataclass(frozen=True)
class TableFiles:
    """A table's data files in its current version (its log's add actions)."""

    live: int
    today: int  # of them, written since 00:00 UTC: what compaction keeps small per day


def files_of(table: Path, now: float | None = None) -> TableFiles | None:
    """The table's live files and those written today, read from its log with delta-rs (no
    Spark: cheap enough for every scrape). None when it cannot be read now (no commit yet, a
    log being checkpointed)."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    if not any((table / DELTA_LOG).glob("*.json")):
        return None
    midnight_ms = int((time.time() if now is None else now) // 86400 * 86400 * 1000)
    try:
        adds = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))
    except (DeltaError, OSError, ValueError):
        return None
    times = adds.column("modification_time").to_pylist()
    return TableFiles(len(times), sum(1 for t in times if t >= midnight_ms))


def table_files(warehouse: Path, now: float | None = None) -> dict[str, TableFiles]:
    """:func:`files_of` each Delta table of the warehouse that can be read now."""
    found: dict[str, TableFiles] = {}
    for table in sorted(warehouse.iterdir()) if warehouse.is_dir() else []:
        if (files := files_of(table, now)) is not None:
            found[table.name] = files
    return found
