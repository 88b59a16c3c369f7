"""Streaming behaviour on a file source: watermark drops, restarts, per-device state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import delta_writes, tables, transforms
from spark_jobs.anomaly import MAD_TO_SIGMA, AnomalyRule, anomalies
from tests.spark_jobs.frames import at, ts

pytestmark = pytest.mark.spark

SOURCE_DDL = "device_id string, ts long, seq long, metrics map<string,double>, recv long"


def _write(folder: Path, name: str, rows: list[tuple[str, int, int, float]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"device_id": d, "ts": t, "seq": s, "metrics": {"t": v}, "recv": t})
        for d, s, t, v in rows
    ]
    (folder / name).write_text("\n".join(lines) + "\n")


def _valid_stream(spark: Any, folder: Path) -> Any:
    """A stream shaped like transforms.valid_telemetry's output."""
    from pyspark.sql import functions as F  # noqa: N812

    return (
        spark.readStream.schema(SOURCE_DDL)
        .json(str(folder))
        .select(
            F.lit("default").alias("tenant"),
            "device_id",
            "ts",
            "seq",
            "metrics",
            F.timestamp_millis("ts").alias("event_time"),
            F.timestamp_millis("recv").alias("received_at"),
        )
    )


def _run_once(df: Any, out: Path, checkpoint: Path) -> dict[str, Any]:
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert not q.isActive, "availableNow run did not finish"
    assert q.exception() is None
    dropped = sum(
        int(s.get("numRowsDroppedByWatermark", 0))
        for p in q.recentProgress
        for s in p.get("stateOperators", [])
    )
    return {"dropped": dropped}


def test_watermark_drops_late_records_and_restart_does_not_double_count(
    spark: Any, tmp_path: Path
) -> None:
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"

    def run() -> dict[str, Any]:
        valid = _valid_stream(spark, src).withWatermark("event_time", "1 minute")
        return _run_once(transforms.device_minute(valid, ["t"]), out, ck)

    # run 1: minute 10 (3 records), then minute 12 moves the watermark to 11:xx
    _write(src, "1.json", [("a", 1, at(10, 1), 1.0), ("a", 2, at(10, 2), 2.0),
                           ("a", 3, at(10, 3), 3.0), ("a", 4, at(12, 30), 4.0)])  # fmt: skip
    assert run()["dropped"] == 0
    # run 2 (a restart from the checkpoint): minute 9 is behind the watermark (dropped), minute
    # 12 gets a second record, minute 20 moves the watermark past minute 12
    _write(src, "2.json", [("a", 9, at(9, 0), 9.0), ("a", 5, at(12, 40), 5.0),
                           ("a", 6, at(20, 0), 6.0)])  # fmt: skip
    assert run()["dropped"] == 1
    # run 3: nothing new; nothing may be written twice
    run()

    got = sorted(
        (r["window_start"], r["messages"], r["first_seq"], r["last_seq"])
        for r in spark.read.parquet(str(out)).collect()
    )
    assert got == [(ts(at(10)), 3, 1, 3), (ts(at(12)), 2, 4, 5)]  # minute 9 dropped, 20 open


def test_anomaly_state_survives_a_restart(spark: Any, tmp_path: Path) -> None:
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    rule = AnomalyRule(history=60, min_history=10, threshold=10.0, rel_floor=0.01, abs_floor=0.05)

    def run() -> None:
        _run_once(anomalies(_valid_stream(spark, src), ["t"], rule), out, ck)

    # run 1: ten normal readings 1..10 (the 10th has only 9 before it: nothing is scored)
    _write(src, "1.json", [("a", s, at(0, s), float(s)) for s in range(1, 11)])
    _write(src, "1b.json", [("b", s, at(0, s), 5.0) for s in range(1, 4)])
    run()
    # run 2: a spike at seq 11; without the restored baseline it could not be scored at all
    _write(src, "2.json", [("a", 11, at(0, 11), 100.0), ("a", 12, at(0, 12), 6.0)])
    run()
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 1
    r = rows[0]
    assert (r["device_id"], r["seq"], r["metric"], r["value"]) == ("a", 11, "t", 100.0)
    assert r["event_time"] == ts(at(0, 11))
    # median of 1..10 = 5.5; |x - 5.5| sorted -> MAD 2.5
    assert r["baseline"] == 5.5
    assert r["scale"] == pytest.approx(MAD_TO_SIGMA * 2.5)
    assert r["score"] == pytest.approx(94.5 / (MAD_TO_SIGMA * 2.5))


def _delta_version(spark: Any, table: Path) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{table}`").agg({"version": "max"}).first()[0])


def test_snapshot_overwrite_is_atomic_and_idempotent(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table = wh / "device_status"
    first = spark.createDataFrame([("a", 1)], "device_id string, n int")
    second = spark.createDataFrame([("a", 2), ("b", 1)], "device_id string, n int")
    delta_writes.overwrite_batch(first, table, "app-1", 0)
    delta_writes.overwrite_batch(second, table, "app-1", 1)
    delta_writes.overwrite_batch(second, table, "app-1", 1)  # a replayed batch: skipped
    assert _delta_version(spark, table) == 1
    got = sorted(
        (r["device_id"], r["n"]) for r in tables.read_table(spark, wh, "device_status").collect()
    )
    assert got == [("a", 2), ("b", 1)]
    assert tables.existing_tables(wh) == {"device_status": table}
    # the snapshot before is still there to time travel to
    old = spark.read.format("delta").option("versionAsOf", 0).load(str(table)).collect()
    assert [(r["device_id"], r["n"]) for r in old] == [("a", 1)]


def _merge_once(spark: Any, df: Any, out: Path, checkpoint: Path) -> None:
    keys = ["tenant", "device_id", "window_start"]

    def each(batch: Any, batch_id: int) -> None:
        app = delta_writes.app_id("device_minute", checkpoint)
        delta_writes.merge_batch(batch, out, keys, app, batch_id)

    q = (
        df.writeStream.outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(each)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert not q.isActive, "availableNow run did not finish"
    assert q.exception() is None


def test_a_late_reading_updates_its_window_once_across_a_replay(spark: Any, tmp_path: Path) -> None:
    """device_minute as the job writes it: update mode, MERGE per batch with a Delta txn."""
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"

    def run() -> None:
        valid = _valid_stream(spark, src).withWatermark("event_time", "10 minutes")
        _merge_once(spark, transforms.device_minute(valid, ["t"]), out, ck)

    def rows() -> list[tuple[Any, ...]]:
        got = spark.read.format("delta").load(str(out)).collect()
        return sorted((r["window_start"], r["messages"], r["last_seq"]) for r in got)

    _write(src, "1.json", [("a", 1, at(10, 1), 1.0), ("a", 2, at(10, 2), 2.0),
                           ("a", 4, at(12, 30), 4.0)])  # fmt: skip
    run()
    assert rows() == [(ts(at(10)), 2, 2), (ts(at(12)), 1, 4)]
    # a late reading of minute 10 (received at minute 13, inside the watermark)
    _write(src, "2.json", [("a", 3, at(10, 3), 3.0)])
    run()
    assert rows() == [(ts(at(10)), 3, 3), (ts(at(12)), 1, 4)]
    version = _delta_version(spark, out)
    # the job killed after the MERGE committed but before the checkpoint did: the batch runs
    # again on restart, and its MERGE (same query id, same batch id) must change nothing
    commits = sorted((ck / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (ck / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    assert _delta_version(spark, out) == version
    assert rows() == [(ts(at(10)), 3, 3), (ts(at(12)), 1, 4)]
