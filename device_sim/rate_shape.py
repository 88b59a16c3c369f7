"""The fleet's rate shape: a pure function of run time -> rate factor (diurnal curve x bursts).

A device's send rate at nominal run time ``t`` is ``rate * factor(t)``. Two shapes multiply:

- *diurnal*: a day compressed into ``diurnal_period`` seconds. The run starts at midnight, the
  quietest point (``diurnal_min``); the curve rises as a raised cosine to ``diurnal_max`` at
  midday (``t = period / 2``) and falls back by the next midnight.
- *bursts*: within every window of ``burst_every`` seconds one burst of ``burst_duration``
  seconds multiplies the rate by ``burst_factor``. Where the burst falls in its window is drawn
  from the seed and the window's number, so the same seed gives the same bursts, and the
  factor at any ``t`` is computed without state (no clock read here: ``t`` is given).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateShape:
    """Diurnal and burst parameters; ``0`` periods turn a shape off (factor 1)."""

    seed: int = 1
    diurnal_period: float = 0.0  # seconds in one compressed day; 0 = flat
    diurnal_min: float = 0.2  # factor at midnight
    diurnal_max: float = 1.0  # factor at midday
    burst_every: float = 0.0  # seconds per burst window; 0 = no bursts
    burst_factor: float = 5.0
    burst_duration: float = 10.0  # seconds (<= burst_every)

    @property
    def flat(self) -> bool:
        return self.diurnal_period <= 0 and self.burst_every <= 0

    def diurnal(self, t: float) -> float:
        """The day curve's factor at ``t`` seconds into the run."""
        if self.diurnal_period <= 0:
            return 1.0
        phase = (t % self.diurnal_period) / self.diurnal_period
        level = (1.0 - math.cos(2.0 * math.pi * phase)) / 2.0  # 0 at midnight, 1 at midday
        return self.diurnal_min + (self.diurnal_max - self.diurnal_min) * level

    def burst_start(self, window: int) -> float:
        """When the burst of window ``window`` (0, 1, ...) starts, in seconds into the run."""
        slack = max(0.0, self.burst_every - self.burst_duration)
        offset = random.Random(f"{self.seed}:burst:{window}").uniform(0.0, slack)
        return window * self.burst_every + offset

    def in_burst(self, t: float) -> bool:
        if self.burst_every <= 0 or t < 0:
            return False
        start = self.burst_start(int(t // self.burst_every))
        return start <= t < start + self.burst_duration

    def factor(self, t: float) -> float:
        """The rate multiplier at ``t`` seconds into the run (always > 0)."""
        value = self.diurnal(t)
        if self.in_burst(t):
            value *= self.burst_factor
        return value

    def problems(self) -> list[str]:
        """What is wrong with the parameters (empty when valid)."""
        out: list[str] = []
        if self.diurnal_period < 0:
            out.append("diurnal_period must be >= 0")
        if not 0 < self.diurnal_min <= self.diurnal_max:
            out.append("need 0 < diurnal_min <= diurnal_max")
        if self.burst_every < 0:
            out.append("burst_every must be >= 0")
        if self.burst_factor <= 0:
            out.append("burst_factor must be > 0")
        if self.burst_every > 0 and not 0 < self.burst_duration <= self.burst_every:
            out.append("need 0 < burst_duration <= burst_every")
        return out
