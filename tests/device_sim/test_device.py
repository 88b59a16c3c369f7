"""The device script: payload contract, determinism, padding and every injection."""

from __future__ import annotations

import itertools

import orjson
import pytest

from bridge.mapping import Topics, map_message
from device_sim.device import DeviceScript
from device_sim.errors import SimConfigError
from device_sim.spec import FleetSpec

RUN = "20260101T000000-abcdef"
T0 = 1_800_000_000_000


def _drive(spec: FleetSpec, index: int = 0, run_id: str = RUN) -> tuple[DeviceScript, list]:
    """Run the script to its end on a fake clock that follows the nominal schedule."""
    script = DeviceScript(spec, index, run_id)
    out = []
    while True:
        script.next_delay()
        if script.done():
            break
        out.extend(script.next_messages(T0 + int(script.elapsed_s * 1000)))
        if script.finished:
            break
    return script, out


def test_payload_contract_and_seq() -> None:
    spec = FleetSpec(devices=1, count=20, duration_s=None, rate=2.0)
    _script, outs = _drive(spec)
    assert [o.seq for o in outs] == list(range(1, 21))
    for o in outs:
        assert o.topic == "devices/dev-00000/telemetry"
        doc = orjson.loads(o.payload)
        assert set(doc) == {"ts", "seq", "metrics", "tags"}
        assert isinstance(doc["ts"], int)
        assert doc["tags"]["run"] == RUN
        assert set(doc["metrics"]) == {"temperature", "humidity", "battery", "vibration"}
        # the bridge's own validation accepts it
        rec = map_message(o.topic, o.payload, 1, 0, topics=Topics(), max_payload_bytes=65536)
        assert rec.error is None
        assert rec.key == b"dev-00000"
    # fixed rate: ts advance by the interval (the fake clock follows the schedule)
    ts = [orjson.loads(o.payload)["ts"] for o in outs]
    assert {b - a for a, b in itertools.pairwise(ts)} == {500}


def test_same_seed_same_payloads_except_run_tag() -> None:
    spec = FleetSpec(
        devices=3,
        count=30,
        duration_s=None,
        anomaly_rate=0.1,
        malformed_rate=0.1,
        late_rate=0.1,
        churn_rate=0.05,
        skew_fraction=0.5,
    )
    _, a = _drive(spec, 2, run_id="run-a-000000000000000")
    _, b = _drive(spec, 2, run_id="run-b-000000000000000")
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.payload.replace(b"run-a", b"run-b") == y.payload
        assert (x.seq, x.malformed_kind, x.after) == (y.seq, y.malformed_kind, y.after)


def test_different_seed_different_payloads() -> None:
    _, a = _drive(FleetSpec(devices=1, count=5, duration_s=None, seed=1))
    _, b = _drive(FleetSpec(devices=1, count=5, duration_s=None, seed=2))
    assert [o.payload for o in a] != [o.payload for o in b]


def test_device_prefix_does_not_change_readings() -> None:
    _, a = _drive(FleetSpec(devices=1, count=5, duration_s=None, device_prefix="x"))
    _, b = _drive(FleetSpec(devices=1, count=5, duration_s=None, device_prefix="y"))
    assert [orjson.loads(o.payload)["metrics"] for o in a] == [
        orjson.loads(o.payload)["metrics"] for o in b
    ]


@pytest.mark.parametrize("size", [300, 1000, 4096])
def test_padding_hits_the_size_target(size: int) -> None:
    _, outs = _drive(FleetSpec(devices=1, count=10, duration_s=None, payload_bytes=size))
    assert {len(o.payload) for o in outs} == {size}


def test_duration_gives_rate_times_duration_messages() -> None:
    _, outs = _drive(FleetSpec(devices=1, rate=4.0, duration_s=10.0))
    assert 39 <= len(outs) <= 40


def test_poisson_rate_is_about_right() -> None:
    _, outs = _drive(FleetSpec(devices=1, rate=10.0, duration_s=200.0, poisson=True))
    assert 1800 < len(outs) < 2200


def test_malformed_every_slot_with_rate_one() -> None:
    spec = FleetSpec(devices=1, count=40, duration_s=None, malformed_rate=1.0)
    _, outs = _drive(spec)
    bad = [o for o in outs if o.malformed_kind is not None]
    good = [o for o in outs if o.malformed_kind is None]
    assert len(bad) == 40
    assert [o.seq for o in good] == list(range(1, 41))
    # malformed ones do not use a seq, and each records its injection
    assert all(o.seq is None for o in bad)
    assert all(o.injections[0][0] == "malformed" for o in bad)
    assert len({o.malformed_kind for o in bad}) >= 5


def test_late_and_out_of_order_shift_ts_and_are_recorded() -> None:
    spec = FleetSpec(
        devices=1, count=300, duration_s=None, rate=1.0, late_rate=0.1, out_of_order_rate=0.1
    )
    _, outs = _drive(spec)
    expected_ts = {o.seq: T0 + int((o.seq - 1) * 1000) for o in outs}
    shifted = {}
    for o in outs:
        for kind, item in o.injections:
            if kind in ("late", "out_of_order"):
                shifted[o.seq] = (kind, item["shift_ms"])
    assert 10 < len(shifted) < 110
    first = orjson.loads(outs[0].payload)["ts"]
    offset = first - expected_ts[1]  # the first send is spread within one interval
    for o in outs:
        ts = orjson.loads(o.payload)["ts"]
        nominal = expected_ts[o.seq] + offset
        kind_shift = shifted.get(o.seq)
        if kind_shift is None:
            assert abs(ts - nominal) <= 1
        else:
            kind, shift = kind_shift
            assert abs(ts - (nominal - shift)) <= 1
            if kind == "late":
                assert 120_000 <= shift <= 900_000
            else:
                assert shift >= 1000  # earlier than the previous message (1 s interval)


def test_clock_skew_is_constant_per_device() -> None:
    spec = FleetSpec(devices=50, count=3, duration_s=None, skew_fraction=0.5, skew_max_ms=5000)
    skews = [DeviceScript(spec, i, RUN).skew_ms for i in range(50)]
    assert 10 < sum(1 for s in skews if s) < 40
    assert all(abs(s) <= 5000 for s in skews)
    i = next(i for i, s in enumerate(skews) if s)
    script = DeviceScript(spec, i, RUN)
    for k in range(3):
        now = T0 + 1000 * k
        (out,) = script.next_messages(now)
        assert orjson.loads(out.payload)["ts"] == now + skews[i]


def test_offline_device_stops_and_records_it() -> None:
    spec = FleetSpec(devices=20, count=100, duration_s=None, offline_fraction=1.0)
    script, outs = _drive(spec, 3)
    assert script.offline_after_seq is not None
    assert 20 <= script.offline_after_seq <= 80
    assert outs[-1].after == "offline"
    assert outs[-1].seq == script.offline_after_seq
    assert ("offline", {"device": "dev-00003", "after_seq": outs[-1].seq}) in outs[-1].injections


def test_churn_marks_messages() -> None:
    spec = FleetSpec(
        devices=1,
        count=500,
        duration_s=None,
        churn_rate=0.02,
        churn_down_min_s=1.0,
        churn_down_max_s=2.0,
    )
    _, outs = _drive(spec)
    churns = [o for o in outs if o.after == "churn"]
    assert 2 <= len(churns) <= 25
    assert all(1.0 <= o.down_s <= 2.0 for o in churns)


def test_anomalies_are_far_from_normal_and_recorded() -> None:
    spec = FleetSpec(devices=1, count=400, duration_s=None, anomaly_rate=0.05)
    _, outs = _drive(spec)
    found = 0
    for o in outs:
        for kind, item in o.injections:
            if kind != "anomalies":
                continue
            found += 1
            value = orjson.loads(o.payload)["metrics"][item["metric"]]
            assert value == item["value"]
            if item["metric"] == "temperature":
                assert abs(value - item["normal"]) >= 12
            elif item["metric"] == "vibration":
                assert value >= 20 * item["normal"]
    assert 5 < found < 50


def test_groups_are_deterministic_and_valid() -> None:
    spec = FleetSpec(devices=100, groups=7, groups_per_device=2)
    groups = [spec.device_groups(i) for i in range(100)]
    assert groups == [
        FleetSpec(devices=100, groups=7, groups_per_device=2).device_groups(i) for i in range(100)
    ]
    assert all(len(g) == 2 and len(set(g)) == 2 for g in groups)
    assert {n for g in groups for n in g} == {f"group-{n}" for n in range(7)}


@pytest.mark.parametrize(
    "bad",
    [
        {"devices": 0},
        {"rate": 0},
        {"qos": 2},
        {"count": 5},  # with the default duration: both given
        {"duration_s": None},  # neither given
        {"anomaly_rate": 1.5},
        {"device_prefix": "bad prefix"},
        {"malformed_kinds": ("nope",)},
    ],
)
def test_spec_validation(bad: dict) -> None:
    with pytest.raises(SimConfigError):
        FleetSpec(**bad)


def test_spec_round_trips_through_a_dict() -> None:
    spec = FleetSpec(devices=3, malformed_kinds=("oversized", "bad_topic"), poisson=True)
    assert FleetSpec.from_dict(orjson.loads(orjson.dumps(spec.to_dict()))) == spec
