"""Attributing raw Kafka records to a run (pure parts of the verifier)."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from device_sim import malformed
from device_sim import manifest as manifest_io
from device_sim.accounting import Report
from device_sim.kafka_io import RawRecord
from device_sim.verifier import (
    TelemetryRows,
    fast_payload_fields,
    parse_dlq,
    parse_telemetry,
    payload_fields,
    summary,
    verify,
)

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


def test_summary_shouts_about_never_acknowledged_messages() -> None:
    report = Report(sent=450_000, missing=338_726, missing_unacked=338_726)
    assert "NEVER ACKNOWLEDGED" not in summary(Report(sent=10), {"run_id": RUN})
    assert "no limit set" in summary(report, {"run_id": RUN})
    report.max_unacked_fraction, report.inconclusive = 0.01, True
    report.failures.append("INCONCLUSIVE: ...")
    text = summary(report, {"run_id": RUN})
    assert "!! NEVER ACKNOWLEDGED  338,726 of 450,000 sent (75.27%) (limit 1.00%)" in text
    assert "the run is INCONCLUSIVE" in text
    assert "FAIL: INCONCLUSIVE" in text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """Telemetry-like JSON with every field possibly missing, mistyped or of another run."""
    doc: dict[str, object] = draw(
        st.dictionaries(st.sampled_from(["metrics", "x", "pad"]), json_values, max_size=2)
    )
    for name, value in (
        ("ts", st.integers(0, 2**62) | json_values),
        ("seq", st.integers(-5, 2**40) | json_values),
        ("device_id", st.text(max_size=5) | json_values),
        (
            "tags",
            st.fixed_dictionaries(
                {"run": st.sampled_from([RUN, RUN + "x", 1, None])},
                optional={"pad": st.text(max_size=20)},
            )
            | json_values,
        ),
    ):
        if draw(st.booleans()) or name == "tags":
            doc[name] = draw(value)
    raw = orjson.dumps(doc)
    if draw(st.integers(0, 9)) == 0:  # broken or non-JSON bytes now and then
        raw = raw[: draw(st.integers(0, len(raw)))] + draw(st.sampled_from([b"", b"\xff", b" x"]))
    return raw


@settings(max_examples=500, deadline=None)
@given(payloads())
def test_fast_payload_fields_agrees_with_orjson(value: bytes) -> None:
    assert fast_payload_fields(value, RUN) == payload_fields(value, RUN)


class Msg:
    """A fetched message as confluent-kafka hands it over (headers: a list of pairs)."""

    def __init__(self, rec: RawRecord) -> None:
        self.rec = rec

    def value(self) -> bytes:
        return self.rec.value

    def key(self) -> bytes | None:
        return self.rec.key

    def headers(self) -> list[tuple[str, bytes]] | None:
        return list(self.rec.headers.items()) or None

    def partition(self) -> int:
        return self.rec.partition

    def timestamp(self) -> tuple[int, int]:
        return (1, self.rec.timestamp)


def _parsed_rows(records: list[RawRecord]) -> list[tuple[Any, ...]]:
    want = []
    for r in records:
        t = parse_telemetry(r, RUN)
        if t is not None:
            want.append((t.device, t.seq, t.partition, t.kafka_ts, t.ts, t.received_at))
    return want


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            payloads(),
            st.sampled_from([b"dev-1", b"d\xc3", b"", None]),
            st.sampled_from([{}, {"received_at": b"950"}, {"received_at": b"x"}, {"qos": b"1"}]),
        ),
        max_size=6,
    )
)
def test_telemetry_rows_agree_with_parse_telemetry_on_any_payload(
    items: list[tuple[bytes, bytes | None, dict[str, bytes]]],
) -> None:
    """The inlined batch path reads exactly what the record-by-record reference reads."""
    records = [raw(value, key=key, headers=headers) for value, key, headers in items]
    rows = TelemetryRows(RUN)([Msg(r) for r in records])  # type: ignore[misc]
    assert rows == _parsed_rows(records)


def test_telemetry_rows_equal_parse_telemetry() -> None:
    """The batch path (messages -> rows) reads what parse_telemetry reads, header and all."""

    good = orjson.dumps({"ts": 900, "seq": 4, "metrics": {}, "tags": {"run": RUN}})
    keyless = orjson.dumps({"ts": 1.5, "seq": 5, "device_id": "d9", "tags": {"run": RUN}})
    records = [
        raw(good, headers={"received_at": b"950"}),
        raw(good, headers={"received_at": b"soon"}),
        raw(keyless, key=None),
        raw(orjson.dumps({"seq": 1, "tags": {"run": "other"}})),
        raw('{"seq": 2, "tags": {"run": "%s", "n": "é"}}'.encode() % RUN.encode()),
    ]
    rows = TelemetryRows(RUN)([Msg(r) for r in records])  # type: ignore[misc]
    assert rows == _parsed_rows(records)
    assert [row[0] for row in rows] == ["dev-1", "dev-1", "d9", "dev-1"]
    assert rows[0][5] == 950
    assert rows[1][5] is None
    assert rows[2][4] is None  # a float ts is no ts


@pytest.mark.integration
def test_streaming_verify_equals_the_old_verify_on_the_same_kafka_run(
    stack: Any, topic_factory: Any
) -> None:
    """The same topics read by the new verify() and by the old read-everything-then-account
    one (tests/device_sim/reference_accounting.py): the same verdict, field by field."""
    from confluent_kafka import Producer

    from tests.device_sim.reference_accounting import reference_verify
    from tests.device_sim.test_accounting_equivalence import assert_same_verdict

    telemetry, dlq = topic_factory("ver.tel", partitions=6), topic_factory("ver.dlq")
    run_id = f"equiv-{uuid.uuid4().hex[:8]}"
    rnd = random.Random(19)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "linger.ms": 20})
    t0 = int(time.time() * 1000) - 120_000  # Kafka refuses timestamps far in the future
    failed: list[object] = []
    producer_poll = producer.poll

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    devices: dict[str, dict[str, Any]] = {}
    late: list[dict[str, Any]] = []
    for i in range(60):
        device, partition, sent = f"eq-{i:03d}", i % 6, rnd.randint(50, 400)
        skew = rnd.choice([0, 0, 0, 7_000])
        seqs = [s for s in range(1, sent + 1) if rnd.random() > 0.02]  # losses
        seqs += [rnd.choice(seqs) for _ in range(rnd.randint(0, 4))]  # redeliveries
        for _ in range(rnd.randint(0, 3)):  # reorders
            j = rnd.randrange(len(seqs) - 1)
            seqs[j], seqs[j + 1] = seqs[j + 1], seqs[j]
        seqs.append(sent + 3)  # out of range: unexpected
        devices[device] = {
            "sent": sent,
            "qos": 0 if i % 10 == 0 else 1,
            "unacked": rnd.sample(range(1, sent + 1), 2),
            "skew_ms": skew,
        }
        late.append({"device": device, "seq": rnd.randint(1, sent), "shift_ms": -300_000})
        for seq in seqs:
            ts = t0 + seq * 100
            lat = rnd.randint(0, 400) if rnd.random() < 0.9 else rnd.randint(8_000, 60_000)
            value = orjson.dumps(
                {"ts": ts + skew, "seq": seq, "metrics": {"t": 1.5}, "tags": {"run": run_id}}
            )
            headers: list[tuple[str, str | bytes | None]] = []
            if seq % 7:  # some records lack the header
                headers.append(("received_at", str(ts + lat // 2).encode()))
            producer.produce(
                telemetry,
                value,
                key=device.encode(),
                partition=partition,
                timestamp=ts + lat,
                headers=headers,
                on_delivery=delivered,
            )
            producer_poll(0)
    other = orjson.dumps({"ts": t0, "seq": 1, "tags": {"run": run_id + "-other"}})
    producer.produce(telemetry, other, key=b"eq-000", partition=0)
    producer.produce(telemetry, b"not json " + run_id.encode(), key=b"eq-001", partition=1)
    keyless = orjson.dumps({"ts": t0, "seq": 1, "device_id": "eq-002", "tags": {"run": run_id}})
    producer.produce(telemetry, keyless, partition=2, timestamp=t0 + 5)
    for error in ("not_json", "not_json", "oversized", "bad_topic"):
        producer.produce(dlq, b"junk " + run_id.encode(), key=b"eq-003", headers={"error": error})
    producer.produce(dlq, b"another run's junk", headers={"error": "not_json"})
    assert producer.flush(30) == 0
    assert failed == []

    injections = manifest_io.empty_injections()
    injections["late"] = late
    manifest = {
        "format": manifest_io.FORMAT,
        "run_id": run_id,
        "started_at_ms": t0,
        "ended_at_ms": t0 + 40_000,
        "start_offsets": None,
        "devices": devices,
        "injections": injections,
        "expected_dlq": {"not_json": 2, "oversized": 2},
    }
    common = {
        "bootstrap": stack.kafka_bootstrap,
        "topic_telemetry": telemetry,
        "topic_dlq": dlq,
        "wait_s": 0.0,
    }
    # the never-acknowledged rule is the new verifier's own (tested in test_accounting)
    new = verify(manifest, **common, max_unacked_fraction=None)
    old = reference_verify(manifest, **common)
    assert old.received > 10_000
    assert old.missing_acked
    assert old.duplicates
    assert old.order_violations
    assert old.unexpected
    assert old.latency.p99_ms is not None
    assert old.latency.p99_ms > 8_192
    assert_same_verdict(new, old)
