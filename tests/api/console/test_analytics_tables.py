"""The console reads the Spark job's tables with DuckDB: flat, or partitioned by tenant."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
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


def _commit(table: Path, batch: int, *files: Path) -> None:
    """A batch of Spark's file-sink log listing ``files``, with the URIs the sink writes."""
    log = table / "_spark_metadata"
    log.mkdir(exist_ok=True)
    lines = ["v1"] + [
        orjson.dumps({"path": f.resolve().as_uri(), "size": 1, "action": "add"}).decode()
        for f in files
    ]
    (log / str(batch)).write_text("\n".join(lines))


def test_partitioned_by_tenant_newest_first_with_the_tenant_column(tmp_path: Path) -> None:
    table = tmp_path / "fleet_minute"
    parts = []
    for tenant, minutes in (("default", [0, 2]), ("acme", [1])):
        (table / f"tenant={tenant}").mkdir(parents=True)
        parts.append(table / f"tenant={tenant}" / "part-0.parquet")
        pq.write_table(_rows(minutes), parts[-1])
    _commit(table, 0, parts[0])
    _commit(table, 1, parts[1])
    # a killed executor's part file: on disk, never committed, so not in the table
    pq.write_table(_rows([3]), table / "tenant=default" / "part-9.parquet")
    (table / "tenant=acme" / "part-8.parquet").write_bytes(b"PAR1 truncated")
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


def test_a_sink_folder_with_only_uncommitted_files_is_missing(tmp_path: Path) -> None:
    table = tmp_path / "rejects"
    (table / "tenant=default").mkdir(parents=True)
    pq.write_table(_rows([0]), table / "tenant=default" / "part-0.parquet")
    _commit(table, 0)  # an empty batch: the version line alone
    assert read_table(tmp_path, "rejects", 5)["missing"] is True


def test_a_delta_table_is_read_through_its_log(tmp_path: Path) -> None:
    """What the job writes now: only the files of the table's current version count, not the
    ones an overwrite (or a MERGE, an OPTIMIZE) replaced and that are still on disk."""
    from deltalake import write_deltalake

    table = tmp_path / "fleet_minute"
    tenant = pa.array(["default", "default", "acme"])
    write_deltalake(str(table), _rows([0, 1, 2]).append_column("tenant", tenant),
                    partition_by=["tenant"])  # fmt: skip
    newer = _rows([0, 5]).append_column("tenant", pa.array(["default", "acme"]))
    write_deltalake(str(table), newer, mode="overwrite", partition_by=["tenant"])
    assert len(list(table.glob("tenant=*/*.parquet"))) == 4  # the old version's files stay
    got = read_table(tmp_path, "fleet_minute", 10)
    assert got["missing"] is False
    assert set(got["columns"]) == {"window_start", "messages", "tenant"}
    at, n = got["columns"].index("tenant"), got["columns"].index("messages")
    assert [(r[at], r[n]) for r in got["rows"]] == [("acme", 60), ("default", 10)]


def test_a_delta_log_without_a_commit_is_missing(tmp_path: Path) -> None:
    (tmp_path / "anomalies" / "_delta_log").mkdir(parents=True)
    assert read_table(tmp_path, "anomalies", 5)["missing"] is True
