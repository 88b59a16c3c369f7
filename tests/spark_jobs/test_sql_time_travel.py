"""`iot-analytics sql` on the Delta tables by name: time travel, the change data feed, and the
one-line errors of a missing table or a version the table does not have (exit 2)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_jobs import delta_writes
from spark_jobs.cli import main

pytestmark = pytest.mark.spark


def _sql(capsys: pytest.CaptureFixture[str], warehouse: Path, query: str) -> tuple[int, str, str]:
    code = main(["sql", "--warehouse-dir", str(warehouse), "--format", "csv", query])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.timeout(1500)  # short Spark jobs, but minutes each on a loaded 2-core box
def test_versions_timestamps_changes_and_clear_errors(
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IOT_LOG_FORMAT", "json")  # log lines told apart from what `sql` says
    table = tmp_path / "device_minute"
    path = str(table)
    # written as the job's session writes: the change data feed is on by default
    spark.createDataFrame([("a", 1), ("b", 2)], "device_id string, n int").write.format(
        "delta"
    ).save(path)  # version 0
    spark.createDataFrame([("c", 3)], "device_id string, n int").write.format("delta").mode(
        "append"
    ).save(path)  # version 1
    spark.sql(f"UPDATE delta.`{path}` SET n = 10 WHERE device_id = 'a'")  # version 2
    # the commit times Delta's time travel goes by (on a local disk the log files' times, which
    # the commits' own commitInfo timestamps precede by a few ms); naive local datetimes
    history = {
        r["version"]: r["timestamp"]
        for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    }
    assert sorted(history) == [0, 1, 2]
    at_v1 = history[1].astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    query = (  # one command for the three: each `sql` registers the tables again
        "SELECT (SELECT sum(n) FROM device_minute) AS now, "
        "(SELECT sum(n) FROM device_minute VERSION AS OF 0) AS v0, "
        f"(SELECT sum(n) FROM device_minute TIMESTAMP AS OF '{at_v1}') AS t1"
    )
    assert _sql(capsys, tmp_path, query)[:2] == (0, "now,v0,t1\n15,3,6\n")
    query = (
        "SELECT _commit_version AS v, _change_type AS t, device_id, n "
        "FROM table_changes('device_minute', 1) ORDER BY v, t"
    )
    code, out, _ = _sql(capsys, tmp_path, query)
    assert (code, out.splitlines()) == (
        0,
        ["v,t,device_id,n", "1,insert,c,3", "2,update_postimage,a,10", "2,update_preimage,a,1"],
    )

    for query, words in (
        ("SELECT * FROM device_hour", ["device_hour"]),
        ("SELECT * FROM device_minute VERSION AS OF 99", ["99"]),
    ):
        code, out, err = _sql(capsys, tmp_path, query)
        assert (code, out) == (2, ""), err
        said = [line for line in err.splitlines() if not line.startswith('{"ts"')]  # our logs
        assert len(said) == 1, err  # one line
        assert said[0].startswith("iot-analytics: error: "), err
        assert all(word in said[0] for word in words), err
        assert "org.apache" not in err, err  # no Java stack trace, not even in a log line
        assert "Traceback" not in err, err


def test_the_job_turns_the_feed_on_for_tables_made_without_it(spark: Any, tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "anomalies"), pa.table({"device_id": ["a"]}))  # no feed
    assert delta_writes.enable_change_feed(spark, tmp_path) == ["anomalies"]
    config = DeltaTable(str(tmp_path / "anomalies")).metadata().configuration
    assert config.get("delta.enableChangeDataFeed") == "true"
    assert delta_writes.enable_change_feed(spark, tmp_path) == []  # once
