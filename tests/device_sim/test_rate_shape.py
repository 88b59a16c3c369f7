"""The rate shape: a pure function of run time (the injected clock) -> rate factor."""

from __future__ import annotations

import pytest

from device_sim.device import DeviceScript
from device_sim.errors import SimConfigError
from device_sim.rate_shape import RateShape
from device_sim.spec import FleetSpec


def test_flat_by_default() -> None:
    shape = RateShape()
    assert shape.flat
    assert [shape.factor(t) for t in (0.0, 1.5, 1e6)] == [1.0, 1.0, 1.0]


def test_diurnal_curve_from_midnight_to_midday_and_back() -> None:
    shape = RateShape(diurnal_period=600, diurnal_min=0.25, diurnal_max=2.0)
    assert shape.factor(0) == pytest.approx(0.25)  # the run starts at midnight
    assert shape.factor(300) == pytest.approx(2.0)  # midday
    assert shape.factor(150) == pytest.approx((0.25 + 2.0) / 2)  # morning: half way
    assert shape.factor(600) == pytest.approx(0.25)  # the next midnight
    assert shape.factor(450 + 600 * 7) == pytest.approx(shape.factor(450))  # periodic
    rising = [shape.factor(t) for t in range(0, 301, 10)]
    assert rising == sorted(rising)
    assert all(0.25 - 1e-9 <= shape.factor(t) <= 2.0 + 1e-9 for t in range(0, 1200, 7))


def test_one_burst_of_the_given_length_in_every_window() -> None:
    shape = RateShape(seed=3, burst_every=60, burst_factor=4, burst_duration=5)
    step = 0.01
    for window in range(20):
        ts = [window * 60 + i * step for i in range(int(60 / step))]
        inside = [t for t in ts if shape.in_burst(t)]
        assert len(inside) * step == pytest.approx(5, abs=2 * step)
        assert inside[-1] - inside[0] == pytest.approx(5, abs=2 * step)  # one contiguous burst
        assert all(shape.factor(t) == 4.0 for t in inside)
        assert shape.factor(window * 60 + 59.999) in (1.0, 4.0)
    assert not shape.in_burst(-1.0)


def test_bursts_are_seeded() -> None:
    a = RateShape(seed=1, burst_every=60, burst_duration=5)
    starts = [a.burst_start(w) for w in range(10)]
    assert starts == [RateShape(seed=1, burst_every=60, burst_duration=5).burst_start(w)
                      for w in range(10)]  # fmt: skip
    assert starts != [RateShape(seed=2, burst_every=60, burst_duration=5).burst_start(w)
                      for w in range(10)]  # fmt: skip
    assert all(w * 60 <= s <= w * 60 + 55 for w, s in enumerate(starts))
    assert len({round(s - w * 60, 6) for w, s in enumerate(starts)}) > 1  # not all at one point


def test_burst_as_long_as_its_window_is_always_on() -> None:
    shape = RateShape(burst_every=10, burst_duration=10, burst_factor=3)
    assert all(shape.factor(t / 10) == 3.0 for t in range(500))


def test_shapes_multiply() -> None:
    shape = RateShape(
        diurnal_period=100, diurnal_min=0.5, diurnal_max=1.5, burst_every=100, burst_duration=100
    )
    assert shape.factor(50) == pytest.approx(1.5 * 5.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"diurnal_period": -1.0},
        {"diurnal_min": 0.0},
        {"diurnal_min": 2.0, "diurnal_max": 1.0},
        {"burst_every": -1.0},
        {"burst_factor": 0.0},
        {"burst_every": 5.0, "burst_duration": 6.0},
        {"burst_every": 5.0, "burst_duration": 0.0},
    ],
)
def test_invalid_shapes_are_refused_by_the_spec(bad: dict) -> None:
    assert RateShape(**bad).problems()
    with pytest.raises(SimConfigError):
        FleetSpec(**bad)


def _send_times(spec: FleetSpec, index: int = 0) -> list[float]:
    """The nominal send times of a device's schedule (its clock: the sum of its delays)."""
    script = DeviceScript(spec, index, "run")
    times: list[float] = []
    while True:
        script.next_delay()
        if script.done():
            return times
        times.append(script.elapsed_s)
        script.next_messages(0)


def test_the_schedule_follows_the_bursts() -> None:
    spec = FleetSpec(
        devices=1, rate=2.0, duration_s=120, burst_every=30, burst_factor=5, burst_duration=6
    )
    shape = spec.rate_shape()
    times = _send_times(spec)
    in_burst = sum(1 for t in times if shape.in_burst(t))
    outside = len(times) - in_burst
    # 4 bursts of 6 s at 10 msg/s, the other 96 s at 2 msg/s (give or take a slot per edge)
    assert in_burst == pytest.approx(240, abs=10)
    assert outside == pytest.approx(192, abs=10)
    flat = _send_times(FleetSpec(devices=1, rate=2.0, duration_s=120))
    assert len(flat) == 240


def test_the_schedule_follows_the_day() -> None:
    spec = FleetSpec(
        devices=1, rate=10.0, duration_s=200, diurnal_period=200, diurnal_min=0.1, diurnal_max=1
    )
    times = _send_times(spec)
    night = sum(1 for t in times if t < 20 or t >= 180)
    noon = sum(1 for t in times if 90 <= t < 130)
    assert noon > 5 * night
    # the integral of the curve: 10 msg/s x 200 s x the mean factor (0.55)
    assert len(times) == pytest.approx(1100, rel=0.03)
    assert times == _send_times(spec)  # deterministic


def test_poisson_follows_the_shape_too() -> None:
    spec = FleetSpec(
        devices=1, rate=5.0, poisson=True, duration_s=300, burst_every=60, burst_factor=4,
        burst_duration=15,
    )  # fmt: skip
    times = _send_times(spec)
    # 75 s at 20 msg/s + 225 s at 5 msg/s = 2625
    assert len(times) == pytest.approx(2625, rel=0.1)
