"""Spark's file-sink log read without Spark: which part files are in a streaming table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from spark_jobs import sink_log, tables


def _line(path: str, action: str = "add", size: int = 10) -> str:
    """One entry as Spark's FileStreamSinkLog writes it (its reader needs every field)."""
    entry = {
        "path": path, "size": size, "isDir": False, "modificationTime": 1_790_000_000_000,
        "blockReplication": 1, "blockSize": 33_554_432, "action": action,
    }  # fmt: skip
    return orjson.dumps(entry).decode()


def _batch(table: Path, name: str, *lines: str) -> None:
    log = table / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    (log / name).write_text("\n".join(["v1", *lines]))


def test_parse_batch_skips_the_version_and_torn_lines() -> None:
    text = "v1\n" + _line("file:/w/t/a.parquet") + "\n" + _line("file:/w/t/b.parquet", "delete")
    assert sink_log.parse_batch(text + '\n{"path": "file:/w/t/c.par') == (
        {"file:/w/t/a.parquet"},
        {"file:/w/t/b.parquet"},
    )
    assert sink_log.parse_batch("v1") == (set(), set())


def test_a_file_keeps_its_place_in_the_table_wherever_the_table_is_mounted() -> None:
    uri = "file:/writer/wh/device_minute/tenant=acme%20co/part-00000-1.snappy.parquet"
    assert sink_log.in_table(Path("/reader/t"), uri) == Path(
        "/reader/t/tenant=acme co/part-00000-1.snappy.parquet"
    )
    flat = sink_log.in_table(Path("/r/t"), "file:///w/t/part-0.parquet")
    assert flat == Path("/r/t/part-0.parquet")


def test_committed_files_follow_the_log_in_batch_order(tmp_path: Path) -> None:
    table = tmp_path / "anomalies"
    assert sink_log.committed_files(table) is None  # no log: not a sink folder
    _batch(table, "0", _line("file:/x/anomalies/tenant=a/p0.parquet"))
    _batch(table, "1")  # an empty micro-batch
    _batch(table, "2", _line("file:/x/anomalies/tenant=b/p2.parquet"))
    _batch(table, "10.compact", _line("file:/x/anomalies/tenant=a/p0.parquet", "delete"))
    _batch(table, ".2.crc", _line("file:/x/anomalies/tenant=z/crc.parquet"))
    _batch(table, "11.tmp", _line("file:/x/anomalies/tenant=z/tmp.parquet"))
    assert sink_log.committed_files(table) == [table / "tenant=b" / "p2.parquet"]


def test_a_table_with_only_a_killed_executors_files_has_no_data(tmp_path: Path) -> None:
    """The CI failure of session 8: ``iot-analytics sql`` died on such a folder."""
    orphan = tmp_path / "rejects" / "tenant=default" / "part-00000-x.snappy.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"PAR1")
    assert tables.existing_tables(tmp_path) == {"rejects": tmp_path / "rejects"}  # no log yet
    _batch(tmp_path / "rejects", "0")  # the log exists and commits nothing
    assert tables.existing_tables(tmp_path) == {}
    _batch(tmp_path / "rejects", "1", _line(orphan.as_uri()))
    assert tables.existing_tables(tmp_path) == {"rejects": tmp_path / "rejects"}


def test_spark_reads_what_the_log_says_and_register_views_skips_the_rest(
    spark: Any, tmp_path: Path
) -> None:
    """Real Spark on both folders: the committed one reads, the uncommitted one is skipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in ("device_minute", "rejects"):
        part = tmp_path / name / "tenant=default" / "part-00000-a.snappy.parquet"
        part.parent.mkdir(parents=True)
        pq.write_table(pa.table({"n": [1, 2]}), part)
        entry = _line(part.as_uri(), size=part.stat().st_size)
        _batch(tmp_path / name, "0", *([entry] if name == "device_minute" else []))
    assert tables.register_views(spark, tmp_path) == ["device_minute"]
    assert spark.sql("SELECT SUM(n) AS s FROM device_minute").collect()[0]["s"] == 3
    with pytest.raises(Exception, match="Unable to infer schema"):  # what `sql` died of
        spark.read.parquet(str(tmp_path / "rejects")).collect()


def test_data_files_without_a_log_are_the_folders_parquet_files(tmp_path: Path) -> None:
    """``device_status``'s snapshots have no sink log: every Parquet file there counts."""
    flat, parted = tmp_path / "flat", tmp_path / "parted"
    (parted / "tenant=a").mkdir(parents=True)
    flat.mkdir()
    (flat / "part-0.parquet").write_bytes(b"PAR1")
    (parted / "tenant=a" / "part-0.parquet").write_bytes(b"PAR1")
    assert sink_log.data_files(flat) == [flat / "part-0.parquet"]
    assert sink_log.data_files(parted) == [parted / "tenant=a" / "part-0.parquet"]
    _batch(parted, "0")  # with a log, only what it commits
    assert sink_log.data_files(parted) == []
