"""Attributing raw Kafka records to a run (pure parts of the verifier)."""

from __future__ import annotations

import orjson

from device_sim import malformed
from device_sim.accounting import Report
from device_sim.kafka_io import RawRecord
from device_sim.verifier import parse_dlq, parse_telemetry, summary

RUN = "20260101T000000-abcdef"


def raw(value: bytes, key: bytes | None = b"dev-1", headers: dict | None = None) -> RawRecord:
    return RawRecord("t", 3, 42, 1000, key, value, headers or {})


def test_parse_telemetry_of_the_run() -> None:
    value = orjson.dumps({"ts": 900, "seq": 4, "metrics": {}, "tags": {"run": RUN}})
    rec = parse_telemetry(raw(value, headers={"received_at": b"950"}), RUN)
    assert rec is not None
    assert (rec.device, rec.seq, rec.partition, rec.offset) == ("dev-1", 4, 3, 42)
    assert (rec.kafka_ts, rec.ts, rec.received_at) == (1000, 900, 950)


def test_parse_telemetry_ignores_other_runs_and_junk() -> None:
    other = orjson.dumps({"ts": 1, "seq": 1, "metrics": {}, "tags": {"run": RUN + "x"}})
    assert parse_telemetry(raw(other), RUN) is None
    mention = orjson.dumps({"ts": 1, "seq": 1, "metrics": {}, "tags": {"note": RUN}})
    assert parse_telemetry(raw(mention), RUN) is None
    assert parse_telemetry(raw(b"not json " + RUN.encode()), RUN) is None
    bad_seq = orjson.dumps({"ts": 1, "seq": "1", "tags": {"run": RUN}})
    assert parse_telemetry(raw(bad_seq), RUN) is None


def test_parse_dlq_finds_the_run_id_in_any_malformed_payload() -> None:
    for kind in malformed.MALFORMED_KINDS:
        _topic, payload = malformed.build(kind, "dev-1", RUN, 1, 10)
        rec = parse_dlq(raw(payload, headers={"error": b"not_json"}), RUN)
        assert rec is not None, kind
        assert rec.error == "not_json"
    assert parse_dlq(raw(b"other run"), RUN) is None
    keyless = parse_dlq(raw(RUN.encode(), key=None, headers={}), RUN)
    assert keyless is not None
    assert keyless.device is None
    assert keyless.error == "(no error header)"


def test_summary_says_ok_or_fail() -> None:
    report = Report()
    assert "RESULT         OK" in summary(report, {"run_id": RUN, "status": "complete"})
    report.failures.append("3 acknowledged telemetry messages missing")
    assert "FAIL: 3 acknowledged" in summary(report, {"run_id": RUN})
