"""The report reads the Delta tables through their logs with delta-rs: no Spark, no glob."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_jobs import lake
from spark_jobs.errors import TableMissingError

ROOT = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)


def _minutes(n: int) -> list[dt.datetime]:
    return [T0 + dt.timedelta(minutes=i) for i in range(n)]


def _warehouse(wh: Path) -> None:
    """Two minutes of d1 and one of d2 (tenant default) and one of d1 in acme; a first
    version of device_minute with wrong counts that an overwrite replaced (its file stays on
    disk, as before a VACUUM: a glob would count it)."""
    starts = [*_minutes(2), T0, T0]
    device_minute = {
        "window_start": starts,
        "window_end": [s + dt.timedelta(minutes=1) for s in starts],
        "device_id": ["d1", "d1", "d2", "d1"],
        "messages": [3, 3, 2, 5],
        "distinct_seq": [3, 2, 2, 5],
        "duplicates": [0, 1, 0, 0],
        "first_seq": [1, 5, 1, 1],  # d1: seq 4 never came
        "last_seq": [3, 6, 2, 5],
        "t_std": [0.5, 1.5, 2.0, 9.0],
        "tenant": ["default", "default", "default", "acme"],
    }
    wrong = {**device_minute, "messages": [300, 300, 200, 500]}
    path = str(wh / "device_minute")
    write_deltalake(path, pa.table(wrong), partition_by=["tenant"])
    write_deltalake(path, pa.table(device_minute), partition_by=["tenant"], mode="overwrite")
    fleet = {
        "window_start": _minutes(2),
        "messages": [5, 3],
        "late_messages": [0, 0],
        "active_devices": [2, 1],
        "t_p50": [20.0, 21.0],
        "t_p95": [22.0, 23.0],
        "tenant": ["default", "default"],
    }
    write_deltalake(str(wh / "fleet_minute"), pa.table(fleet), partition_by=["tenant"])
    anomalies = {
        "event_time": [T0, T0, T0 + dt.timedelta(seconds=30), T0],
        "device_id": ["d1", "d1", "d1", "d1"],
        "metric": ["t", "h", "t", "t"],
        "tenant": ["default", "default", "default", "acme"],
    }
    write_deltalake(str(wh / "anomalies"), pa.table(anomalies), partition_by=["tenant"])


def test_datasets_are_the_current_version_and_a_missing_table_is_one_error(
    tmp_path: Path,
) -> None:
    _warehouse(tmp_path)
    assert len(list((tmp_path / "device_minute").glob("tenant=*/*.parquet"))) == 4
    rows = lake.dataset(tmp_path, "device_minute").to_table()
    assert sorted(rows.column("messages").to_pylist()) == [2, 3, 3, 5]
    with pytest.raises(TableMissingError, match="'rejects' has no data yet"):
        lake.dataset(tmp_path, "rejects")
    (tmp_path / "rejects" / "_delta_log").mkdir(parents=True)  # no commit yet
    with pytest.raises(TableMissingError):
        lake.dataset(tmp_path, "rejects")
    con, found = lake.connect(tmp_path, ("device_minute", "rejects"))
    assert found == {"device_minute"}
    assert "tenant" in lake.columns(con, "device_minute")


def test_report_of_delta_tables_runs_without_spark(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    _warehouse(wh)
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import sys
        from spark_jobs.cli import main
        rc = main(["report", "--warehouse-dir", {str(wh)!r}, "--out", {str(out)!r},
                   "--noise-metric", "t"])
        assert rc == 0, rc
        assert "pyspark" not in sys.modules, "the report imported pyspark"
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = (out / "devices.csv").read_text().splitlines()
    header = lines[0].split(",")
    devices = {r.split(",")[0]: dict(zip(header, r.split(","), strict=True)) for r in lines[1:]}
    d1, d2 = devices["d1"], devices["d2"]
    assert (d1["minutes"], d1["messages"], d1["duplicates"], d1["lost"]) == ("2", "6", "1", "1")
    assert float(d1["uptime"]) == 1.0  # the data's 2 minutes
    assert float(d1["loss_rate"]) == pytest.approx(1 / 6)
    assert float(d1["noise"]) == pytest.approx(1.0)
    assert (d1["anomalies"], d1["top_metric"]) == ("3", "t")  # acme's row is not default's
    assert (d2["minutes"], d2["anomalies"], d2["top_metric"]) == ("1", "0", "")
    summary = (out / "report.md").read_text()
    assert "| 2 | 2 | 8 | 1 | 1 | 3 |" in summary  # devices, minutes, messages, dups, lost, anom.
    assert {p.name for p in out.glob("*.png")} >= {"fleet_messages.png", "uptime.png"}


def test_sql_on_duckdb_reads_the_current_versions_and_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_jobs.cli import main

    _warehouse(tmp_path)
    (tmp_path / "_checkpoints").mkdir()  # not a table
    query = "SELECT tenant, sum(messages) AS n FROM device_minute GROUP BY tenant ORDER BY tenant"
    argv = ["sql", "--engine", "duckdb", "--warehouse-dir", str(tmp_path), "--format", "csv"]
    assert main([*argv, query]) == 0
    assert capsys.readouterr().out.splitlines() == ["tenant,n", "acme,5", "default,8"]
    assert main([*argv, "SELECT max(window_start) AS t FROM fleet_minute"]) == 0
    assert capsys.readouterr().out.splitlines() == ["t", "2026-01-01 10:01:00"]  # UTC
    assert main([*argv, "--max-rows", "1", "SELECT * FROM anomalies"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main([*argv, "SELECT * FROM rejects"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iot-analytics: error: Catalog Error: Table with name rejects")
    assert len(err.splitlines()) == 1
    assert main([*argv, "SELEC 1"]) == 2
    assert capsys.readouterr().err.startswith("iot-analytics: error: Parser Error")
    empty = tmp_path / "empty"
    assert main(["sql", "--engine", "duckdb", "--warehouse-dir", str(empty), "SELECT 1"]) == 1
    assert "no tables under" in capsys.readouterr().err
