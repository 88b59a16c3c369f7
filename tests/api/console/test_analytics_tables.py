"""The console reads the Spark job's tables with DuckDB: flat, or partitioned by tenant."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from api.console.analytics import read_table


def _rows(minutes: list[int]) -> pa.Table:
    start = dt.datetime(2026, 1, 1, 12, 0)
    return pa.table(
        {
            "window_start": [start + dt.timedelta(minutes=m) for m in minutes],
            "messages": [10 * (m + 1) for m in minutes],
        }
    )


def test_partitioned_by_tenant_newest_first_with_the_tenant_column(tmp_path: Path) -> None:
    table = tmp_path / "fleet_minute"
    for tenant, minutes in (("default", [0, 2]), ("acme", [1])):
        (table / f"tenant={tenant}").mkdir(parents=True)
        pq.write_table(_rows(minutes), table / f"tenant={tenant}" / "part-0.parquet")
    (table / "_spark_metadata").mkdir()  # Spark's commit log: not data
    got = read_table(tmp_path, "fleet_minute", 10)
    assert got["missing"] is False
    assert set(got["columns"]) == {"window_start", "messages", "tenant"}
    at = got["columns"].index("tenant")
    assert [(r[at], r[got["columns"].index("messages")]) for r in got["rows"]] == [
        ("default", 30), ("acme", 20), ("default", 10),
    ]  # fmt: skip


def test_flat_table_and_missing_table(tmp_path: Path) -> None:
    (tmp_path / "anomalies").mkdir()
    assert read_table(tmp_path, "anomalies", 5)["missing"] is True
    pq.write_table(_rows([0, 1]), tmp_path / "anomalies" / "part-0.parquet")
    got = read_table(tmp_path, "anomalies", 5)
    assert got["columns"] == ["window_start", "messages"]
    assert [r[1] for r in got["rows"]] == [20, 10]
    assert read_table(tmp_path, "nothing", 5)["missing"] is True
