"""The verifier's accounting on hand-built record lists whose answers are known."""

from __future__ import annotations

import pytest

from device_sim.accounting import (
    DeviceExpectation,
    DlqRecord,
    Expectations,
    TelemetryRecord,
    account,
    percentile,
    ranges,
)


def rec(
    device: str,
    seq: int,
    offset: int,
    partition: int = 0,
    kafka_ts: int = 0,
    ts: int | None = None,
    received_at: int | None = None,
) -> TelemetryRecord:
    return TelemetryRecord(device, seq, partition, offset, kafka_ts, ts, received_at)


def clean(device: str, n: int, partition: int = 0) -> list[TelemetryRecord]:
    return [rec(device, s, s, partition) for s in range(1, n + 1)]


def test_clean_run() -> None:
    exp = Expectations({"a": DeviceExpectation(5), "b": DeviceExpectation(3)})
    report = account(exp, clean("a", 5, 0) + clean("b", 3, 1))
    assert (report.sent, report.received, report.unique) == (8, 8, 8)
    assert (report.missing, report.duplicates, report.order_violations) == (0, 0, 0)
    assert report.partitions_per_device == {"1": 2}
    assert report.ok
    assert report.problems == []


def test_gap_is_missing_and_fails_when_acknowledged() -> None:
    exp = Expectations({"a": DeviceExpectation(10)})
    records = [r for r in clean("a", 10) if r.seq not in (4, 5, 9)]
    report = account(exp, records)
    assert report.missing == 3
    assert report.missing_acked == 3
    assert not report.ok
    assert report.problems[0].missing == ["4-5", "9"]


def test_unacknowledged_missing_does_not_fail() -> None:
    exp = Expectations({"a": DeviceExpectation(10, unacked=frozenset({9, 10}))})
    report = account(exp, clean("a", 8))
    assert (report.missing, report.missing_acked, report.missing_unacked) == (2, 0, 2)
    assert report.ok


def _starved(unacked: int, limit: float | None) -> Expectations:
    """100 messages sent, the last ``unacked`` never acknowledged by Mosquitto."""
    never = frozenset(range(101 - unacked, 101))
    return Expectations({"a": DeviceExpectation(100, unacked=never)}, max_unacked_fraction=limit)


def test_too_many_never_acknowledged_make_the_run_inconclusive() -> None:
    # the shape of the starved fleet run: most of what was sent never acknowledged nor arrived
    report = account(_starved(75, 0.01), clean("a", 25))
    assert (report.missing_acked, report.missing_unacked) == (0, 75)
    assert report.unacked_fraction == 0.75
    assert report.inconclusive
    assert not report.ok
    assert report.failures[0].startswith("INCONCLUSIVE: 75 of 100 telemetry messages (75.00%)")


def test_never_acknowledged_within_the_limit_pass_but_are_reported() -> None:
    report = account(_starved(1, 0.01), clean("a", 99))
    assert (report.unacked_fraction, report.max_unacked_fraction) == (0.01, 0.01)
    assert not report.inconclusive
    assert report.ok
    # one more over the limit fails
    assert account(_starved(2, 0.01), clean("a", 98)).inconclusive


def test_never_acknowledged_that_arrived_after_all_do_not_count() -> None:
    # Mosquitto's PUBACK was lost but the message reached Kafka: delivered, not starved
    report = account(_starved(50, 0.01), clean("a", 100))
    assert (report.missing, report.unacked_fraction, report.inconclusive) == (0, 0.0, False)
    assert report.ok


def test_qos0_losses_count_as_never_acknowledged() -> None:
    exp = Expectations({"a": DeviceExpectation(10, qos=0)}, max_unacked_fraction=0.1)
    assert account(exp, clean("a", 9)).ok
    report = account(exp, clean("a", 8))
    assert report.missing_unacked == 2
    assert report.inconclusive


def test_without_a_limit_the_old_rule_holds() -> None:
    report = account(_starved(75, None), clean("a", 25))
    assert report.ok
    assert (report.unacked_fraction, report.inconclusive) == (None, False)


def test_qos0_missing_is_never_acknowledged() -> None:
    exp = Expectations({"a": DeviceExpectation(10, qos=0)})
    report = account(exp, clean("a", 7))
    assert (report.missing, report.missing_acked) == (3, 0)
    assert report.ok


def test_duplicates_are_counted_not_missing() -> None:
    exp = Expectations({"a": DeviceExpectation(5)})
    records = [*clean("a", 5), rec("a", 3, 6), rec("a", 5, 7), rec("a", 5, 8)]
    report = account(exp, records)
    assert report.duplicates == 3
    assert report.unique == 5
    assert report.received == 8
    assert report.missing == 0
    assert report.order_violations == 0  # a redelivered seq is a duplicate, not disorder
    assert report.ok


def test_order_violation() -> None:
    exp = Expectations({"a": DeviceExpectation(5)})
    # log order: 1 2 4 3 5 -> 3 arrives after 4
    order = [1, 2, 4, 3, 5]
    report = account(exp, [rec("a", s, off) for off, s in enumerate(order)])
    assert report.order_violations == 1
    assert report.ok  # disorder is reported, not fatal


def test_log_order_is_offset_order_not_list_order() -> None:
    exp = Expectations({"a": DeviceExpectation(3)})
    records = [rec("a", 3, 2), rec("a", 1, 0), rec("a", 2, 1)]
    assert account(exp, records).order_violations == 0


def test_device_spanning_partitions_fails() -> None:
    exp = Expectations({"a": DeviceExpectation(4), "b": DeviceExpectation(2)})
    records = [
        rec("a", 1, 0, 0),
        rec("a", 2, 1, 0),
        rec("a", 3, 0, 5),
        rec("a", 4, 1, 5),
        *clean("b", 2, 3),
    ]
    report = account(exp, records)
    assert report.devices_spanning_partitions == ["a"]
    assert report.partitions_per_device == {"1": 1, "2": 1}
    assert not report.ok


def test_unexpected_records() -> None:
    exp = Expectations({"a": DeviceExpectation(2)})
    records = [*clean("a", 2), rec("a", 3, 9), rec("a", 0, 10), rec("ghost", 1, 0, 4)]
    report = account(exp, records)
    assert report.unexpected == 3
    assert report.missing == 0


def test_device_never_seen_is_all_missing() -> None:
    exp = Expectations({"a": DeviceExpectation(2), "b": DeviceExpectation(4)})
    report = account(exp, clean("a", 2))
    assert report.devices_seen == 1
    assert report.missing_acked == 4


def test_dlq_counts_against_manifest() -> None:
    exp = Expectations({}, dlq={"not_json": 3, "oversized": 1})
    dlq = [
        DlqRecord("a", "not_json", 0, 0),
        DlqRecord("a", "not_json", 0, 1),
        DlqRecord(None, "bad_topic", 1, 0),
        DlqRecord("b", "oversized", 2, 0),
    ]
    report = account(exp, [], dlq)
    assert report.dlq_received == {"bad_topic": 1, "not_json": 2, "oversized": 1}
    assert report.dlq_missing == {"not_json": 1}
    assert report.dlq_extra == {"bad_topic": 1}
    assert not report.ok


def test_dlq_exact_match_is_ok() -> None:
    exp = Expectations({}, dlq={"not_json": 2})
    dlq = [DlqRecord("a", "not_json", 0, 0), DlqRecord("a", "not_json", 0, 1)]
    report = account(exp, [], dlq)
    assert report.dlq_missing == {}
    assert report.dlq_extra == {}
    assert report.ok


def test_latency_corrects_skew_and_skips_injected_times() -> None:
    # device a: skew +5000 ms; device b: seq 2 carries a deliberately late ts
    exp = Expectations(
        {
            "a": DeviceExpectation(2, skew_ms=5000),
            "b": DeviceExpectation(2, skip_latency=frozenset({2})),
        }
    )
    records = [
        rec("a", 1, 0, kafka_ts=1010, ts=6000, received_at=1005),  # true ts 1000 -> 10 ms
        rec("a", 2, 1, kafka_ts=2030, ts=7000, received_at=2010),  # 30 ms
        rec("b", 1, 0, 1, kafka_ts=1020, ts=1000),  # 20 ms
        rec("b", 2, 1, 1, kafka_ts=2000, ts=-500_000),  # skipped
    ]
    report = account(exp, records)
    assert report.latency.count == 3
    assert report.latency.p50_ms == 20.0
    assert report.latency.max_ms == 30.0
    assert report.bridge_latency.count == 2
    assert report.bridge_latency.p50_ms == 5.0


def test_latency_of_duplicates_counts_once() -> None:
    exp = Expectations({"a": DeviceExpectation(1)})
    records = [rec("a", 1, 0, kafka_ts=100, ts=90), rec("a", 1, 1, kafka_ts=5000, ts=90)]
    assert account(exp, records).latency.count == 1


def test_throughput() -> None:
    exp = Expectations({"a": DeviceExpectation(11)}, started_at_ms=0, ended_at_ms=2000)
    records = [rec("a", s, s, kafka_ts=1000 + (s - 1) * 100) for s in range(1, 12)]
    report = account(exp, records)
    assert report.throughput_sent_per_s == 5.5
    assert report.throughput_received_per_s == 11.0


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError, match="nothing"):
        percentile([], 50)


def test_ranges() -> None:
    assert ranges([9, 1, 2, 3, 7, 10]) == ["1-3", "7", "9-10"]
    assert ranges([]) == []


def test_report_to_dict_has_verdict() -> None:
    exp = Expectations({"a": DeviceExpectation(2)})
    doc = account(exp, clean("a", 1)).to_dict()
    assert doc["ok"] is False
    assert doc["missing_acked"] == 1
    assert doc["failures"]
