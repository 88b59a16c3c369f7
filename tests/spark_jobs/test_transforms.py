"""The pure transforms on hand-built frames with exactly known answers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from spark_jobs import schemas, transforms
from tests.spark_jobs.frames import at, kafka_frame, kafka_row, telemetry, ts

pytestmark = pytest.mark.spark


def test_parse_telemetry_reasons_and_received_at(spark: Any) -> None:
    rows = [
        kafka_row("d1", telemetry(1, at(0, 1), t=1.5), received_at=at(0, 2), offset=0),
        kafka_row("d1", telemetry(2, at(0, 3), t=2), offset=1, kafka_ms=at(0, 9)),
        kafka_row(None, telemetry(3, at(0, 4), t=1.0), offset=2),
        kafka_row("d1", b"not json", offset=3),
        kafka_row("d1", b"[1, 2]", offset=4),
        kafka_row("d1", {"seq": 4, "metrics": {"t": 1}}, offset=5),
        kafka_row("d1", {"ts": at(0, 5), "metrics": {"t": 1}}, offset=6),
        kafka_row("d1", {"ts": at(0, 5), "seq": 5, "metrics": {"t": "hot"}}, offset=7),
        kafka_row("d1", b'{"ts": 1, "seq": 2, "metrics": {"t": 1}', offset=8),
        kafka_row("d1", {"ts": 10**18, "seq": 6, "metrics": {"t": 1}}, offset=9),
        kafka_row("d1", {"ts": -5, "seq": 7, "metrics": {"t": 1}}, offset=10),
    ]
    bad_header = list(kafka_row("d1", telemetry(8, at(0, 6), t=1.0), offset=11))
    bad_header[6] = [("received_at", b"yesterday")]
    rows.append(tuple(bad_header))
    parsed = transforms.parse_telemetry(kafka_frame(spark, rows))
    got = {r["kafka_offset"]: r["reason"] for r in parsed.collect()}
    assert got == {
        0: None,
        1: None,
        2: schemas.REASON_NO_KEY,
        3: schemas.REASON_NOT_JSON,
        4: schemas.REASON_NOT_JSON,
        5: schemas.REASON_NO_TS,
        6: schemas.REASON_NO_SEQ,
        7: schemas.REASON_NO_METRICS,
        8: schemas.REASON_NOT_JSON,
        9: schemas.REASON_NO_TS,
        10: schemas.REASON_NO_TS,
        11: None,
    }
    valid = transforms.valid_telemetry(parsed).orderBy("seq").collect()
    assert [(r["device_id"], r["seq"], r["metrics"]) for r in valid] == [
        ("d1", 1, {"t": 1.5}),
        ("d1", 2, {"t": 2.0}),
        ("d1", 8, {"t": 1.0}),
    ]
    assert valid[0]["event_time"] == ts(at(0, 1))
    assert valid[0]["received_at"] == ts(at(0, 2))  # the bridge's header
    assert valid[1]["received_at"] == ts(at(0, 9))  # no header: the Kafka timestamp
    rejected = transforms.rejects(parsed)
    assert valid[2]["received_at"] == ts(at(0))  # unreadable header: the Kafka timestamp
    assert rejected.count() == 9
    assert rejected.where("reason = 'not_json' AND raw_value = 'not json'").count() == 1


def _valid(spark: Any, rows: list[tuple[str, int, int, dict[str, float], int]]) -> Any:
    """(device, seq, ts ms, metrics, received ms) -> the valid_telemetry shape."""
    raw = [
        kafka_row(dev, telemetry(seq, t, **m), received_at=recv, offset=i)
        for i, (dev, seq, t, m, recv) in enumerate(rows)
    ]
    return transforms.valid_telemetry(transforms.parse_telemetry(kafka_frame(spark, raw)))


def test_device_minute_gaps_duplicates_and_stats(spark: Any) -> None:
    from pyspark.testing import assertDataFrameEqual

    rows = [
        # device a, minute 0: seq 1,2,3,5,5,7 -> missing 4 and 6, seq 5 twice
        ("a", 1, at(0, 1), {"t": 1.0}, at(0, 1)),
        ("a", 2, at(0, 2), {"t": 2.0}, at(0, 2)),
        ("a", 3, at(0, 3), {"t": 3.0}, at(0, 3)),
        ("a", 5, at(0, 5), {"t": 5.0}, at(0, 5)),
        ("a", 5, at(0, 5), {"t": 5.0}, at(0, 6)),
        ("a", 7, at(0, 7), {"t": 8.0}, at(0, 7)),
        # device a, minute 1: one record
        ("a", 8, at(1, 0), {"t": 4.0}, at(1, 1)),
        # device b, minute 0: seq 10 and 11, one without the metric
        ("b", 10, at(0, 30), {"t": 6.0}, at(0, 30)),
        ("b", 11, at(0, 40), {"u": 1.0}, at(0, 41)),
    ]
    out = transforms.device_minute(_valid(spark, rows), ["t"])
    cols = [
        "window_start",
        "window_end",
        "device_id",
        "messages",
        "distinct_seq",
        "first_seq",
        "last_seq",
        "missing_seq",
        "duplicates",
        "last_received_at",
        "t_min",
        "t_avg",
        "t_max",
    ]
    expected = spark.createDataFrame(
        [
            (ts(at(0)), ts(at(1)), "a", 6, 5, 1, 7, 2, 1, ts(at(0, 7)), 1.0, 4.0, 8.0),
            (ts(at(1)), ts(at(2)), "a", 1, 1, 8, 8, 0, 0, ts(at(1, 1)), 4.0, 4.0, 4.0),
            (ts(at(0)), ts(at(1)), "b", 2, 2, 10, 11, 0, 0, ts(at(0, 41)), 6.0, 6.0, 6.0),
        ],
        out.select(*cols).schema,
    )
    assertDataFrameEqual(out.select(*cols), expected)
    stds = {
        r["device_id"]: r["t_std"]
        for r in out.where("window_start = '2026-01-01 12:00:00'").collect()
    }
    # sample std of [1,2,3,5,5,8]: mean 4, squares 9+4+1+1+1+16 = 32, 32/5 = 6.4
    assert stds["a"] == pytest.approx(6.4**0.5)
    assert stds["b"] is None  # one value


def test_fleet_minute_percentiles_active_devices_and_late(spark: Any) -> None:
    from pyspark.testing import assertDataFrameEqual

    rows = []
    for i in range(1, 21):  # minute 0: t = 1..20 over 4 devices; 3 received after the minute
        recv = at(1, 5) if i in (2, 9, 17) else at(0, i)
        rows.append((f"d{i % 4}", i, at(0, i), {"t": float(i)}, recv))
    rows.append(("d0", 100, at(1, 0), {"t": 50.0}, at(1, 0)))  # minute 1: one record
    out = transforms.fleet_minute(_valid(spark, rows), ["t"])
    expected = spark.createDataFrame(
        # nearest-rank percentiles of 1..20: p50 = 10th value, p95 = 19th value
        [
            (ts(at(0)), ts(at(1)), "default", 4, 20, 3, 10.0, 19.0),
            (ts(at(1)), ts(at(2)), "default", 1, 1, 0, 50.0, 50.0),
        ],
        out.schema,
    )
    assertDataFrameEqual(out, expected)


def test_device_status_online_offline(spark: Any) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    now = at(10)
    rows = [
        ("fresh", 1, at(9, 30), {"t": 1.0}, at(9, 30)),  # 30 s ago: online
        ("quiet", 1, at(5), {"t": 1.0}, at(5)),  # 5 min ago: silent
        ("bye", 1, at(9, 50), {"t": 1.0}, at(9, 50)),  # then said offline
        ("back", 1, at(9, 50), {"t": 1.0}, at(9, 50)),  # offline earlier, sent since
    ]
    presence_rows = [
        ("bye", {"online": False, "at": at(9, 55)}),
        ("back", {"online": False, "at": at(9, 40)}),
        ("hello", {"online": True, "at": at(9, 45)}),  # connected, no telemetry yet
        ("hello", {"online": False, "at": at(8)}),  # an older record of it
        ("gone", {"online": True, "at": at(1)}),  # connected long ago, never sent
    ]
    presence = transforms.parse_presence(
        kafka_frame(spark, [kafka_row(k, v, offset=i) for i, (k, v) in enumerate(presence_rows)])
    )
    facts = transforms.device_facts(_valid(spark, rows), presence)
    status = transforms.device_status(facts, F.lit(ts(now)), silence_s=60.0)
    got = {r["device_id"]: (r["online"], r["reason"]) for r in status.collect()}
    assert got == {
        "fresh": (True, "telemetry"),
        "quiet": (False, "silence"),
        "bye": (False, "presence"),
        "back": (True, "telemetry"),
        "hello": (True, "presence"),
        "gone": (False, "silence"),
    }
    row = status.where("device_id = 'bye'").first()
    assert row is not None
    assert (row["last_seen"], row["last_seq"], row["messages"]) == (ts(at(9, 50)), 1, 1)
    assert row["as_of"] == ts(now)


def test_report_device_summary(spark: Any) -> None:
    from spark_jobs.report import anomaly_counts, device_summary

    rows = [
        # device a: seq 1..10 with 3 and 4 missing (4 straddles minutes), 6 twice
        *[("a", s, at(0, s), {"t": float(s)}, at(0, s)) for s in (1, 2)],
        *[("a", s, at(1, s), {"t": float(s)}, at(1, s)) for s in (5, 6, 6, 7)],
        *[("a", s, at(3, s), {"t": 1.0}, at(3, s)) for s in (8, 9, 10)],
        ("b", 1, at(0), {"t": 1.0}, at(0)),
    ]
    dm = transforms.device_minute(_valid(spark, rows), ["t"])
    # the report's DuckDB summary of the minutes Spark's transform made
    summary = device_summary(dm.toPandas(), 4, "t")
    got = {r["device_id"]: r for r in summary.to_dict("records")}
    a = got["a"]
    assert (a["minutes"], a["messages"], a["duplicates"], a["lost"]) == (3, 9, 1, 2)
    assert a["uptime"] == pytest.approx(3 / 4)
    assert a["loss_rate"] == pytest.approx(2 / 10)
    assert a["duplicate_rate"] == pytest.approx(1 / 9)
    assert (got["b"]["minutes"], got["b"]["lost"], got["b"]["uptime"]) == (1, 0, 0.25)
    an = spark.createDataFrame(
        [("a", "t"), ("a", "t"), ("a", "h"), ("b", "h")], "device_id string, metric string"
    )
    counts = {
        r["device_id"]: (r["anomalies"], r["top_metric"])
        for r in anomaly_counts(an.toPandas()).to_dict("records")
    }
    assert counts == {"a": (3, "t"), "b": (1, "h")}


def test_parse_time() -> None:
    from spark_jobs.errors import AnalyticsError
    from spark_jobs.report import parse_time

    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    assert parse_time("-2h", now) == dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
    assert parse_time("-30m", now) == dt.datetime(2026, 1, 1, 11, 30, tzinfo=dt.UTC)
    assert parse_time("2026-01-01T08:00") == dt.datetime(2026, 1, 1, 8, 0, tzinfo=dt.UTC)
    with pytest.raises(AnalyticsError):
        parse_time("yesterday")
