"""A warehouse of the earlier layout (Parquet file sink + snapshot link) becomes Delta tables
without losing a row, and without taking a killed attempt's leftover file in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from api.console.analytics import read_table as console_read
from spark_jobs import tables
from spark_jobs.migrate import migrate_warehouse
from tests.spark_jobs.frames import at
from tests.spark_jobs.test_streaming import _valid_stream, _write

pytestmark = pytest.mark.spark


def _old_layout(spark: Any, wh: Path, src: Path) -> None:
    """anomalies as the file sink wrote it (two batches, tenant folders, _spark_metadata),
    a part file no batch committed; device_status as a link to its newest snapshot."""
    for n, rows in enumerate(([("a", 1, at(1), 1.0), ("b", 1, at(1), 2.0)],
                              [("a", 2, at(2), 3.0)])):  # fmt: skip
        _write(src, f"{n}.json", rows)
        q = (
            _valid_stream(spark, src)
            .writeStream.format("parquet")
            .partitionBy("tenant")
            .option("path", str(wh / "anomalies"))
            .option("checkpointLocation", str(wh / "_checkpoints" / "anomalies"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None
    committed = next((wh / "anomalies" / "tenant=default").glob("part-*.parquet"))
    shutil.copy(committed, committed.with_name("part-99999-killed-attempt.c000.snappy.parquet"))
    for batch, n in ((1, 1), (2, 2)):
        spark.createDataFrame(
            [(f"d{i}", batch, "default") for i in range(n)],
            "device_id string, last_seq long, tenant string",
        ).write.partitionBy("tenant").parquet(
            str(wh / "device_status.versions" / f"batch={batch:012d}")
        )
    os.symlink("device_status.versions/batch=000000000002", wh / "device_status")


def test_the_earlier_layout_is_migrated_in_place_without_losing_a_row(
    spark: Any, tmp_path: Path
) -> None:
    wh = tmp_path / "warehouse"
    _old_layout(spark, wh, tmp_path / "in")
    before = {
        name: sorted(map(tuple, tables.read_table(spark, wh, name).collect()))
        for name in ("anomalies", "device_status")
    }
    assert len(before["anomalies"]) == 3  # the killed attempt's copy is not in the table
    assert migrate_warehouse(spark, wh) == ["anomalies", "device_status"]
    assert (wh / "anomalies" / "_delta_log").is_dir()
    assert not (wh / "device_status").is_symlink()
    assert not (wh / "device_status.versions").exists()
    for name, rows in before.items():
        got = spark.read.format("delta").load(str(wh / name))
        assert (
            sorted(map(tuple, got.select(*tables.read_table(spark, wh, name).columns).collect()))
            == rows
        )
        # and read without Spark, through the new log, as the console does
        assert len(console_read(wh, name, 100)["rows"]) == len(rows)
    assert migrate_warehouse(spark, wh) == []  # already Delta: nothing to do
