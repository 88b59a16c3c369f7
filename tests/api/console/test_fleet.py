from __future__ import annotations

import orjson
import pytest

import api.console.fleet as fleet_mod
from api.console.fleet import FleetState, letter_view

Headers = list[tuple[str, bytes]] | None


def _apply(state: FleetState, kind: str, key: str | None, doc: object, offset: int = 0,
           headers: Headers = None, raw: bytes | None = None) -> None:  # fmt: skip
    value = raw if raw is not None else orjson.dumps(doc)
    state.apply(kind, partition=0, offset=offset, key=key.encode() if key else None,
                value=value, headers=headers, timestamp=5)  # fmt: skip


def test_telemetry_and_presence_make_a_device_row() -> None:
    state = FleetState()
    _apply(state, "telemetry", "d1", {"ts": 1000, "seq": 0, "metrics": {"temp": 20.0}})
    _apply(state, "telemetry", "d1", {"ts": 2000, "seq": 1, "metrics": {"temp": 21.5, "hum": 3}})
    _apply(state, "presence", "d1", {"online": True, "at": 1500})
    row = state.device_row("d1", now_ms=3000)
    assert row["online"] is True
    assert row["last_seen"] == 2000
    assert row["values"] == {"temp": 21.5, "hum": 3}
    assert row["rate"] == round(2 / 60, 3)
    assert row["spark"] == [[1000, 20.0], [2000, 21.5]]
    assert state.device_row("nobody", 0)["online"] is None


def test_a_tenants_records_are_its_devices_by_their_user_name() -> None:
    """Same-named devices of two tenants stay apart: the bridge's `tenant` header decides."""
    state = FleetState()
    acme: Headers = [("tenant", b"acme"), ("received_at", b"1")]
    _apply(state, "telemetry", "pump-1", {"ts": 1000, "metrics": {"t": 1.0}}, headers=acme)
    _apply(state, "presence", "pump-1", {"online": True, "at": 900}, headers=acme)
    _apply(state, "telemetry", "pump-1", {"ts": 2000, "metrics": {"t": 2.0}})
    _apply(state, "telemetry", "pump-1", {"ts": 3000, "metrics": {"t": 3.0}},
           headers=[("tenant", b"../x")])  # fmt: skip  # not a tenant id: the default's
    assert state.device_row("acme/pump-1", 5000)["values"] == {"t": 1.0}
    assert state.device_row("acme/pump-1", 5000)["online"] is True
    assert state.device_row("pump-1", 5000)["values"] == {"t": 3.0}
    assert state.device_row("pump-1", 5000)["online"] is None


def test_the_tenant_known_from_the_topic_wins_over_the_header() -> None:
    state = FleetState()
    value = orjson.dumps({"ts": 1000, "metrics": {"t": 1.0}})
    state.apply("telemetry", partition=0, offset=0, key=b"pump-1", value=value,
                headers=None, timestamp=5, tenant="beta")  # fmt: skip
    assert state.device_row("beta/pump-1", 2000)["values"] == {"t": 1.0}
    assert "pump-1" not in state.devices


def test_dead_letters_and_their_audit_disposition() -> None:
    state = FleetState()
    headers = [("mqtt_topic", b"devices/d1/telemetry"), ("error", b"not_json"),
               ("error_detail", b"bad"), ("received_at", b"1234")]  # fmt: skip
    _apply(state, "dlq", "d1", None, offset=7, headers=headers, raw=b"<oops")
    view = letter_view(state.dlq["0-7"])
    assert (view["code"], view["device"], view["received_at"]) == ("not_json", "d1", 1234)
    assert view["payload"] == "<oops"
    assert view["status"] == "new"
    _apply(state, "audit", "0-7", {"action": "dlq.replay", "ref": "0-7", "actor": "svc/o"})
    assert letter_view(state.dlq["0-7"])["status"] == "replayed"
    # a disposition read before its letter (audit partition ahead) still applies
    _apply(state, "audit", "0-8", {"action": "dlq.discard", "ref": "0-8", "actor": "svc/o"})
    _apply(state, "dlq", "d1", None, offset=8, headers=headers, raw=b"x")
    assert state.dlq["0-8"].status == "discarded"


def test_command_status_history_and_replies() -> None:
    state = FleetState()
    for st in ("accepted", "sent", "sent", "succeeded"):
        doc = {"command_id": "c1", "state": st, "device_id": "d1", "at": 10,
               "command": {"name": "reboot", "args": {}}}  # fmt: skip
        _apply(state, "status", "c1", doc)
    _apply(state, "replies", "d1", {"command_id": "c1", "match": "matched", "status": "ok"})
    entry = state.commands["c1"]
    assert [s["state"] for s in entry["states"]] == ["accepted", "sent", "succeeded"]
    assert entry["state"] == "succeeded"
    assert entry["name"] == "reboot"
    assert entry["replies"] == [{"match": "matched", "status": "ok"}]
    assert state.final_counts == {"succeeded": 1}


def test_eviction_marks_memory_incomplete_and_old_letters_get_their_audit_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_mod, "MAX_DLQ", 2)  # a small window for the test
    state = FleetState()
    state.complete["dlq"] = True  # the tailer read the topic from its start
    _apply(state, "audit", None, {"action": "dlq.discard", "ref": "0-0", "actor": "svc/op"})
    for offset in range(2):
        _apply(state, "dlq", "d1", None, offset, [("error", b"not_json")], raw=b"x")
    assert state.complete["dlq"] is True
    _apply(state, "dlq", "d1", None, 2, [("error", b"not_json")], raw=b"x")
    assert state.complete["dlq"] is False  # 0-0 left memory: searches read Kafka
    assert list(state.dlq) == ["0-1", "0-2"]
    # a letter read back from Kafka gets the status the audit trail gave it
    old = fleet_mod.dead_letter(0, 0, key=b"d1", value=b"x", headers=None, timestamp=1)
    assert (state.dispose(old).status, old.by) == ("discarded", "svc/op")


@pytest.mark.parametrize(("per_s", "count"), [(0.5, 5), (1, 5), (2, 200), (4, 5), (25, 5)])
def test_the_rate_is_the_load_sent_whatever_the_rate(per_s: float, count: int) -> None:
    """Issue 32: 200 devices sending 2 msgs/s each showed 1.00 (the rate was counted from the
    sparkline's 60 points). A known load, evenly spaced, for 90 s: every device's rate is it,
    to a sixtieth (the oldest second of the window is counted in part), at any phase."""
    state = FleetState()
    devices = [f"d{i}" for i in range(count)]
    gap_ms = int(1000 / per_s)
    for i in range(int(90 * per_s)):
        for n, name in enumerate(devices):
            at = 1_000_000 + i * gap_ms + n  # the devices' clocks a millisecond apart
            _apply(state, "telemetry", name, {"ts": at, "seq": i, "metrics": {"t": 1.0}})
    last = 1_000_000 + (int(90 * per_s) - 1) * gap_ms
    for now in (last + 200, last + 500, last + 999):
        rates = {state.device_row(name, now)["rate"] for name in devices}
        # off by at most one second's records over the minute (and the rounding to 3 places)
        assert all(abs(r - per_s) <= max(1, per_s) / 60 + 5e-4 for r in rates), (now, rates)
    assert len(state.devices["d0"].per_second) <= 62  # bounded, whatever the history
    assert state.device_row("d0", last + 61_000)["rate"] == 0.0  # silent for a minute


def test_the_rate_counts_records_without_metrics_too() -> None:
    state = FleetState()
    for i in range(120):
        doc = {"ts": 10_000 + i * 500} | ({"metrics": {"t": 1.0}} if i % 2 else {})
        _apply(state, "telemetry", "d1", doc)
    assert state.device_row("d1", 10_000 + 119 * 500 + 1)["rate"] == pytest.approx(2.0, abs=0.02)
