"""Sensor models: determinism, ranges and the shapes analytics rely on."""

from __future__ import annotations

import itertools
import random
import statistics

from device_sim.model import SensorModel


def _series(seed: str, n: int, step: float = 60.0, day: float = 86400.0) -> list[dict[str, float]]:
    model = SensorModel(random.Random(seed), day)
    return [model.read(i * step) for i in range(n)]


def test_same_seed_same_readings() -> None:
    assert _series("a", 200) == _series("a", 200)


def test_different_seed_different_readings() -> None:
    assert _series("a", 50) != _series("b", 50)


def test_ranges_hold_over_a_long_run() -> None:
    for reading in _series("ranges", 3000, step=120.0):
        assert 0.0 <= reading["humidity"] <= 100.0
        assert 0.0 <= reading["battery"] <= 100.0
        assert reading["vibration"] >= 0.0
        assert -20.0 < reading["temperature"] < 50.0


def test_battery_never_increases() -> None:
    batteries = [r["battery"] for r in _series("batt", 500, step=300.0)]
    assert all(b2 <= b1 for b1, b2 in itertools.pairwise(batteries))
    assert batteries[-1] < batteries[0]


def test_temperature_follows_the_daily_cycle() -> None:
    # a 1000 s "day": the mean over the warm half exceeds the mean over the cold half by
    # about the amplitude (the walk is small against it)
    model = SensorModel(random.Random("cycle"), 1000.0)
    readings = [(t, model.read(float(t))["temperature"]) for t in range(4000)]
    warm: list[float] = []
    cold: list[float] = []
    for t, temp in readings:
        base = model.baseline_temperature(float(t)) - model.profile.temp_base
        (warm if base > 0 else cold).append(temp)
    gap = statistics.mean(warm) - statistics.mean(cold)
    expected = 2 * model.profile.temp_amplitude * 2 / 3.141592653589793  # mean of |sin| * 2A
    assert abs(gap - expected) < 0.5 * expected


def test_humidity_moves_against_temperature() -> None:
    series = _series("hum", 2000, step=60.0, day=20000.0)
    temps = [r["temperature"] for r in series]
    hums = [r["humidity"] for r in series]
    assert statistics.correlation(temps, hums) < -0.5


def test_vibration_has_occasional_spikes() -> None:
    values = [r["vibration"] for r in _series("vib", 20000, step=1.0)]
    median = statistics.median(values)
    spikes = sum(1 for v in values if v > 4 * median)
    assert 0 < spikes < len(values) * 0.05
