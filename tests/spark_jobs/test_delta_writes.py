"""Delta writes of the job: appends once per transaction, and the tables' upkeep (row
retention, compaction, VACUUM)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.delta_writes import Upkeep, append_batch
from spark_jobs.retention import Retention


def test_upkeep_is_due_every_interval_from_the_job_start_and_never_at_0() -> None:
    now = [100.0]
    upkeep = Upkeep(60, 168, clock=lambda: now[0])
    assert not upkeep.due("t")  # the job just started
    now[0] = 159.0
    assert not upkeep.due("t")
    now[0] = 160.0
    assert upkeep.due("t")
    assert not Upkeep(0, 168, clock=lambda: now[0] + 1e9).due("t")


def test_upkeep_statements_zorder_where_asked() -> None:
    upkeep = Upkeep(60, 24, zorder={"device_minute": ("device_id",)})
    table = Path("/w/device_minute")
    assert upkeep.statements(table) == [
        "OPTIMIZE delta.`/w/device_minute` ZORDER BY (`device_id`)",
        "VACUUM delta.`/w/device_minute` RETAIN 24 HOURS",
    ]
    assert upkeep.statements(Path("/w/rejects"))[0] == "OPTIMIZE delta.`/w/rejects`"


def _files(spark: Any, table: Path) -> int:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
    return int(detail["numFiles"])


def _total(spark: Any, table: Path, **options: str) -> tuple[int, int]:
    """(rows, sum of n), read from the files (a count() may come from the log's statistics)."""
    df = spark.read.format("delta").options(**options).load(str(table))
    row = df.selectExpr("count(n) AS rows", "sum(n) AS total").first()
    return int(row["rows"]), int(row["total"] or 0)


@pytest.mark.spark
def test_append_once_then_optimize_and_vacuum_keep_rows_cut_files_and_time_travel(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "rejects"
    for batch in range(4):
        rows = [(f"d{batch}", batch, t) for t in ("default", "acme")]
        df = spark.createDataFrame(rows, "device_id string, n int, tenant string")
        append_batch(df, table, "app-1", batch)
    append_batch(df, table, "app-1", 3)  # batch 3 replayed: skipped
    assert _total(spark, table) == (8, 2 * sum(range(4)))
    assert _files(spark, table) >= 8
    on_disk = len(list(table.glob("tenant=*/*.parquet")))

    # past the bound of files per day: compacted after the batch, no upkeep due (interval 0)
    Upkeep(0, 168, max_files_per_day=4).after_batch(spark, table)
    # OPTIMIZE made one file per tenant; the old files stay (no VACUUM here)
    assert _files(spark, table) == 2
    assert _total(spark, table) == (8, 2 * sum(range(4)))
    assert len(list(table.glob("tenant=*/*.parquet"))) == on_disk + 2
    assert _total(spark, table, versionAsOf="1") == (4, 2 * sum(range(2)))  # time travel

    Upkeep(1, 0).run(spark, table)  # VACUUM keeping nothing older: only the live files stay
    assert len(list(table.glob("tenant=*/*.parquet"))) == 2
    assert _total(spark, table) == (8, 2 * sum(range(4)))
    with pytest.raises(Exception, match=r"(?i)not.*found|does not exist|FileNotFound"):
        _total(spark, table, versionAsOf="1")  # its files are gone now


@pytest.mark.spark
def test_upkeep_deletes_rows_past_each_tenants_retention_and_keeps_the_rest(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "rejects"
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)  # Spark's session zone is UTC
    ages = (0.5, 10, 60)  # days
    rows = [
        (f"{tenant}-{age}", now - dt.timedelta(days=age), tenant)
        for tenant in ("default", "acme", "globex")
        for age in ages
    ]
    df = spark.createDataFrame(rows, "device_id string, kafka_timestamp timestamp, tenant string")
    append_batch(df, table, "app-r", 0)
    # default 30 days; acme 1 day; globex forever
    rows_kept = Retention.parse(["rejects=30"], ["acme:rejects=1", "globex:rejects=0"])
    Upkeep(1, 168, rows=rows_kept).run(spark, table)
    kept = spark.read.format("delta").load(str(table)).select("device_id").collect()
    assert sorted(r["device_id"] for r in kept) == sorted(
        ["default-0.5", "default-10", "acme-0.5", "globex-0.5", "globex-10", "globex-60"]
    )
