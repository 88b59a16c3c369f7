"""Seeded sensor models: what a simulated device measures, as a pure function of its seed.

Nothing here reads a clock or does I/O. A model advances by *nominal* elapsed time (the sum of
the device's scheduled send intervals), so the same seed gives the same readings on every run
whatever the wall clock or the machine's load.

- temperature: a per-device base, a daily (sine) cycle with a per-device phase, plus a
  mean-reverting random walk;
- humidity: anti-correlated with temperature's cycle, plus noise, clamped to 0..100 %;
- battery: drains at a per-device rate (percent per hour) with tiny noise, never below 0;
- vibration: a gamma-distributed RMS level with occasional natural spikes (x4..x10).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

DAY_SECONDS = 86400.0


@dataclass(frozen=True, slots=True)
class SensorProfile:
    """A device's fixed characteristics, drawn once from its seed."""

    temp_base: float
    temp_amplitude: float
    phase_s: float
    humidity_base: float
    battery_start: float
    battery_drain_per_h: float
    vibration_shape: float
    vibration_scale: float
    vibration_spike_p: float


def draw_profile(rng: random.Random, day_seconds: float = DAY_SECONDS) -> SensorProfile:
    """Draw a device profile from ``rng`` (consumes a fixed number of draws)."""
    return SensorProfile(
        temp_base=rng.uniform(17.0, 25.0),
        temp_amplitude=rng.uniform(1.5, 6.0),
        phase_s=rng.uniform(0.0, day_seconds),
        humidity_base=rng.uniform(35.0, 60.0),
        battery_start=rng.uniform(55.0, 100.0),
        battery_drain_per_h=rng.uniform(0.2, 2.0),
        vibration_shape=rng.uniform(2.0, 4.0),
        vibration_scale=rng.uniform(0.05, 0.2),
        vibration_spike_p=rng.uniform(0.002, 0.01),
    )


class SensorModel:
    """One device's sensors. Call :meth:`read` with non-decreasing nominal elapsed seconds."""

    __slots__ = ("_battery", "_day_s", "_last_elapsed", "_rng", "_walk", "profile")

    def __init__(self, rng: random.Random, day_seconds: float = DAY_SECONDS) -> None:
        self._rng = rng
        self._day_s = day_seconds
        self.profile = draw_profile(rng, day_seconds)
        self._walk = 0.0
        self._battery = self.profile.battery_start
        self._last_elapsed = 0.0

    def baseline_temperature(self, elapsed_s: float) -> float:
        """Temperature without the random walk: the device's own expected value at that time."""
        p = self.profile
        angle = 2.0 * math.pi * (elapsed_s + p.phase_s) / self._day_s
        return p.temp_base + p.temp_amplitude * math.sin(angle)

    def read(self, elapsed_s: float) -> dict[str, float]:
        """Advance to ``elapsed_s`` (nominal seconds since start) and return the readings."""
        p = self.profile
        rng = self._rng
        dt = max(0.0, elapsed_s - self._last_elapsed)
        self._last_elapsed = max(self._last_elapsed, elapsed_s)
        # mean-reverting random walk (Ornstein-Uhlenbeck step), scaled by sqrt(dt)
        self._walk += -0.01 * self._walk * dt + rng.gauss(0.0, 0.08) * math.sqrt(max(dt, 1e-3))
        self._walk = max(-4.0, min(4.0, self._walk))
        cycle = self.baseline_temperature(elapsed_s) - p.temp_base
        temperature = p.temp_base + cycle + self._walk
        humidity = p.humidity_base - 1.8 * cycle + rng.gauss(0.0, 0.6)
        humidity = max(0.0, min(100.0, humidity))
        self._battery -= p.battery_drain_per_h * dt / 3600.0 * rng.uniform(0.8, 1.2)
        self._battery = max(0.0, self._battery)
        vibration = rng.gammavariate(p.vibration_shape, p.vibration_scale)
        if rng.random() < p.vibration_spike_p:
            vibration *= rng.uniform(4.0, 10.0)
        return {
            "temperature": round(temperature, 3),
            "humidity": round(humidity, 2),
            "battery": round(self._battery, 3),
            "vibration": round(vibration, 4),
        }
