"""The events' verdict: lost, duplicated and reordered events per device, apart from telemetry."""

from __future__ import annotations

from typing import Any

from device_sim import manifest as manifest_io
from device_sim.accounting import Accountant
from device_sim.event_accounting import fold_events


def _manifest(**devices: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": "r", "started_at_ms": 0, "ended_at_ms": 1000, "devices": devices}


def _rows(device: str, seqs: list[int], partition: int = 0) -> list[tuple]:
    return [(device, s, partition, 1000 + s, 990 + s, None) for s in seqs]


def _telemetry_report(doc: dict[str, Any]) -> Any:
    tele = Accountant(manifest_io.expectations(doc))
    for device, info in doc["devices"].items():
        tele.add_telemetry(_rows(device, list(range(1, info["sent"] + 1))))
    return tele.report()


def test_no_events_no_event_expectations() -> None:
    doc = _manifest(a={"sent": 3}, b={"sent": 2, "events_sent": 0})
    assert manifest_io.event_expectations(doc) is None


def test_event_expectations_from_the_manifest() -> None:
    doc = _manifest(
        a={"sent": 3, "events_sent": 4, "events_unacked": [4], "skew_ms": 70},
        b={"sent": 2},
    )
    exp = manifest_io.event_expectations(doc)
    assert exp is not None
    assert exp.devices["a"].sent == 4
    assert exp.devices["a"].unacked == frozenset({4})
    assert exp.devices["a"].skew_ms == 70
    assert exp.devices["a"].qos == 1
    assert exp.devices["b"].sent == 0


def test_clean_events_keep_the_report_ok() -> None:
    doc = _manifest(a={"sent": 3, "events_sent": 4}, b={"sent": 2, "events_sent": 1})
    report = _telemetry_report(doc)
    exp = manifest_io.event_expectations(doc)
    assert exp is not None
    events = Accountant(exp)
    events.add_telemetry(_rows("a", [1, 2, 3, 4]) + _rows("b", [1]))
    fold_events(report, events.report())
    assert report.ok
    assert report.events is not None
    assert (report.events["sent"], report.events["unique"], report.events["missing"]) == (5, 5, 0)
    assert report.events["latency"]["count"] == 5
    assert report.to_dict()["events"]["received"] == 5


def test_lost_duplicated_reordered_and_split_events() -> None:
    doc = _manifest(
        a={"sent": 3, "events_sent": 6, "events_unacked": [6]},
        b={"sent": 2, "events_sent": 3},
    )
    report = _telemetry_report(doc)
    telemetry_before = report.to_dict()
    exp = manifest_io.event_expectations(doc)
    assert exp is not None
    events = Accountant(exp)
    # a: 2 lost (acknowledged), 6 lost (never acknowledged), 3 twice, 5 before 4
    events.add_telemetry(_rows("a", [1, 3, 3, 5, 4]))
    events.add_telemetry(_rows("b", [1, 2]) + _rows("b", [3], partition=1))
    fold_events(report, events.report())
    ev = report.events
    assert ev is not None
    assert (ev["missing"], ev["missing_acked"], ev["missing_unacked"]) == (2, 1, 1)
    assert (ev["duplicates"], ev["order_violations"]) == (1, 1)
    assert ev["devices_spanning_partitions"] == ["b"]
    assert ev["problems"][0]["device"] == "a"
    assert ev["problems"][0]["missing"] == ["2", "6"]
    assert not report.ok
    assert report.failures == [
        "events: 1 acknowledged events missing",
        "events: 1 devices span more than one partition",
    ]
    # the telemetry figures are untouched by the events
    after = report.to_dict()
    for key, value in telemetry_before.items():
        if key not in ("events", "failures", "ok"):
            assert after[key] == value, key


def test_the_summary_has_an_events_line_only_with_events() -> None:
    from device_sim.verifier import summary

    doc = _manifest(a={"sent": 3, "events_sent": 2})
    report = _telemetry_report(doc)
    assert "events" not in summary(report, doc)
    exp = manifest_io.event_expectations(doc)
    assert exp is not None
    events = Accountant(exp)
    events.add_telemetry(_rows("a", [1]))
    fold_events(report, events.report())
    text = summary(report, doc)
    assert "events         sent 2, received 1 (1 unique), missing 1 (acknowledged: 1)" in text
    assert "FAIL: events: 1 acknowledged events missing" in text
