"""Device events: the contract, their own seqs, alarms for anomalies, restarts after churn."""

from __future__ import annotations

from typing import Any

import orjson

from bridge.mapping import Topics, map_message, validate_event
from device_sim.device import DeviceScript, Outgoing
from device_sim.events import EVENT_TYPES, SPONTANEOUS
from device_sim.spec import FleetSpec

RUN = "20260101T000000-abcdef"


def _drive(spec: FleetSpec, index: int = 0) -> list[list[Outgoing]]:
    """Every slot's messages, on a fake clock following the nominal schedule."""
    script = DeviceScript(spec, index, RUN)
    slots: list[list[Outgoing]] = []
    while True:
        script.next_delay()
        if script.done():
            return slots
        slots.append(script.next_messages(1_800_000_000_000 + int(script.elapsed_s * 1000)))
        if script.finished:
            return slots


def _events(slots: list[list[Outgoing]]) -> list[Outgoing]:
    return [o for slot in slots for o in slot if o.event_seq is not None]


def test_no_events_unless_asked() -> None:
    spec = FleetSpec(devices=1, count=300, duration_s=None, anomaly_rate=0.1, churn_rate=0.05)
    assert _events(_drive(spec)) == []


def test_events_follow_the_contract_and_reach_the_events_topic() -> None:
    spec = FleetSpec(devices=1, count=300, duration_s=None, event_rate=0.2, anomaly_rate=0.05)
    events = _events(_drive(spec))
    assert events
    topics = Topics()
    for e in events:
        doc = orjson.loads(e.payload)
        assert validate_event(doc) is None
        assert set(doc) == {"ts", "seq", "type", "data"}
        assert doc["seq"] == e.event_seq
        assert doc["type"] == e.event_type
        assert doc["data"]["run"] == RUN
        assert e.topic == "devices/dev-00000/events"
        assert e.qos == 1
        assert e.seq is None
        record = map_message(e.topic, e.payload, 1, 0, topics=topics, max_payload_bytes=65536)
        assert record.topic == topics.events
    # their own sequence: 1..n without gaps, apart from telemetry's
    assert [e.event_seq for e in events] == list(range(1, len(events) + 1))
    assert {e.event_type for e in events} <= set(EVENT_TYPES)


def test_spontaneous_events_at_the_rate() -> None:
    spec = FleetSpec(devices=1, count=2000, duration_s=None, event_rate=0.1)
    events = _events(_drive(spec))
    assert 150 <= len(events) <= 250
    assert {e.event_type for e in events} == set(SPONTANEOUS)


def test_an_alarm_for_every_anomaly() -> None:
    spec = FleetSpec(devices=1, count=500, duration_s=None, event_rate=0.01, anomaly_rate=0.05)
    slots = _drive(spec)
    for slot in slots:
        telemetry = next(o for o in slot if o.seq is not None)
        anomalies = [item for kind, item in telemetry.injections if kind == "anomalies"]
        alarms = [orjson.loads(o.payload) for o in slot if o.event_type == "alarm"]
        assert len(alarms) == len(anomalies)
        for alarm, anomaly in zip(alarms, anomalies, strict=True):
            assert alarm["data"]["reading"] == telemetry.seq
            assert alarm["data"]["metric"] == anomaly["metric"]
            assert alarm["data"]["value"] == anomaly["value"]
    assert sum(1 for o in _events(slots) if o.event_type == "alarm") >= 10


def test_a_restart_event_first_thing_after_each_churn() -> None:
    spec = FleetSpec(devices=1, count=800, duration_s=None, event_rate=0.01, churn_rate=0.03)
    slots = _drive(spec)
    churned = 0
    for i, slot in enumerate(slots):
        telemetry = next(o for o in slot if o.seq is not None)
        restarts = [o for o in slot if o.event_type == "restart"]
        before = next(o for o in slots[i - 1] if o.seq is not None) if i else None
        if before is not None and before.after == "churn":
            churned += 1
            assert len(restarts) == 1
            data = orjson.loads(restarts[0].payload)["data"]
            assert data == {"run": RUN, "reason": "reconnect", "down_s": before.down_s}
        else:
            assert restarts == []
        # the churn decision stays on the telemetry message, whatever events follow it
        assert all(o.after == "none" for o in slot if o is not telemetry)
    assert churned >= 5


def test_events_do_not_change_the_telemetry() -> None:
    base: dict[str, Any] = {
        "devices": 1,
        "count": 300,
        "duration_s": None,
        "anomaly_rate": 0.05,
        "seed": 4,
    }
    plain = [o for slot in _drive(FleetSpec(**base)) for o in slot]
    with_events = [o for slot in _drive(FleetSpec(**base, event_rate=0.3)) for o in slot]
    assert [o for o in with_events if o.event_seq is None] == plain


def test_same_seed_same_events() -> None:
    spec = FleetSpec(devices=3, count=200, duration_s=None, event_rate=0.2, anomaly_rate=0.02)
    first = [(o.event_type, o.payload) for o in _events(_drive(spec, 2))]
    again = [(o.event_type, o.payload) for o in _events(_drive(spec, 2))]
    other = [(o.event_type, o.payload) for o in _events(_drive(spec, 1))]
    assert first == again
    assert first != other
