"""What a run simulates: the fleet, its traffic and its injections (a frozen, validated spec)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from device_sim.errors import SimConfigError
from device_sim.malformed import BUILDERS, MALFORMED_KINDS
from device_sim.model import DAY_SECONDS
from device_sim.rate_shape import RateShape

_PREFIX_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """Everything that decides what the devices send; the same spec + seed = the same payloads."""

    devices: int = 10
    seed: int = 1
    device_prefix: str = "dev"
    rate: float = 1.0  # messages per second per device
    poisson: bool = False
    qos: int = 1
    payload_bytes: int = 0  # 0 = natural size, else pad tags to about this many bytes
    duration_s: float | None = 10.0
    count: int | None = None  # telemetry messages per device (instead of duration)
    groups: int = 10
    groups_per_device: int = 1
    day_seconds: float = DAY_SECONDS
    # injections (probabilities per telemetry message unless said otherwise)
    anomaly_rate: float = 0.0
    malformed_rate: float = 0.0
    malformed_kinds: tuple[str, ...] = MALFORMED_KINDS
    oversize_bytes: int = 65536 + 1024
    late_rate: float = 0.0
    late_min_s: float = 120.0
    late_max_s: float = 900.0
    out_of_order_rate: float = 0.0
    skew_fraction: float = 0.0  # fraction of devices whose clock is off
    skew_max_ms: int = 120_000
    churn_rate: float = 0.0
    churn_down_min_s: float = 0.5
    churn_down_max_s: float = 3.0
    offline_fraction: float = 0.0  # fraction of devices that go offline for good mid-run
    # events (devices/{id}/events): spontaneous ones per telemetry slot; alarms and restarts too
    event_rate: float = 0.0
    # rate shape (see device_sim.rate_shape): a compressed day and bursts; 0 = off
    diurnal_period: float = 0.0
    diurnal_min: float = 0.2
    diurnal_max: float = 1.0
    burst_every: float = 0.0
    burst_factor: float = 5.0
    burst_duration: float = 10.0
    # command handling
    reply_latency_ms: float = 50.0
    reply_fail_rate: float = 0.0
    silent_fraction: float = 0.0  # fraction of devices that never answer a command

    def __post_init__(self) -> None:
        problems: list[str] = []

        def need(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        need(self.devices >= 1, "devices must be >= 1")
        need(
            bool(self.device_prefix) and set(self.device_prefix) <= _PREFIX_CHARS,
            "device_prefix must be non-empty and use only [A-Za-z0-9_.:-]",
        )
        need(len(self.device_prefix) <= 100, "device_prefix too long")
        need(self.rate > 0, "rate must be > 0")
        need(self.qos in (0, 1), "qos must be 0 or 1")
        need(self.payload_bytes >= 0, "payload_bytes must be >= 0")
        need(
            (self.duration_s is None) != (self.count is None),
            "give exactly one of duration_s and count",
        )
        need(self.duration_s is None or self.duration_s > 0, "duration_s must be > 0")
        need(self.count is None or self.count >= 1, "count must be >= 1")
        need(self.groups >= 1, "groups must be >= 1")
        need(0 <= self.groups_per_device <= self.groups, "groups_per_device must be 0..groups")
        need(self.day_seconds > 0, "day_seconds must be > 0")
        for name in (
            "anomaly_rate",
            "malformed_rate",
            "late_rate",
            "out_of_order_rate",
            "skew_fraction",
            "churn_rate",
            "offline_fraction",
            "event_rate",
            "reply_fail_rate",
            "silent_fraction",
        ):
            need(0.0 <= getattr(self, name) <= 1.0, f"{name} must be in [0, 1]")
        need(all(k in BUILDERS for k in self.malformed_kinds), "unknown malformed kind")
        need(
            bool(self.malformed_kinds) or self.malformed_rate == 0,
            "malformed_rate > 0 needs at least one malformed kind",
        )
        need(0 < self.late_min_s <= self.late_max_s, "need 0 < late_min_s <= late_max_s")
        need(self.skew_max_ms >= 1, "skew_max_ms must be >= 1")
        need(
            0 <= self.churn_down_min_s <= self.churn_down_max_s,
            "need 0 <= churn_down_min_s <= churn_down_max_s",
        )
        need(self.oversize_bytes >= 1, "oversize_bytes must be >= 1")
        need(self.reply_latency_ms >= 0, "reply_latency_ms must be >= 0")
        problems.extend(self.rate_shape().problems())
        if problems:
            raise SimConfigError("invalid simulation: " + "; ".join(problems))

    # --- the fleet ---------------------------------------------------------------------------

    def device_id(self, index: int) -> str:
        """The id of device ``index`` (0-based): ``<prefix>-<index:05d>``."""
        return f"{self.device_prefix}-{index:05d}"

    def device_groups(self, index: int) -> tuple[str, ...]:
        """The groups device ``index`` belongs to, drawn from the seed (``group-<n>``)."""
        rng = random.Random(f"{self.seed}:groups:{index}")
        picked = sorted(rng.sample(range(self.groups), self.groups_per_device))
        return tuple(f"group-{n}" for n in picked)

    def rate_shape(self) -> RateShape:
        """The fleet's rate multiplier over run time (diurnal curve and bursts)."""
        return RateShape(
            seed=self.seed,
            diurnal_period=self.diurnal_period,
            diurnal_min=self.diurnal_min,
            diurnal_max=self.diurnal_max,
            burst_every=self.burst_every,
            burst_factor=self.burst_factor,
            burst_duration=self.burst_duration,
        )

    def expected_count(self) -> int:
        """Telemetry messages per device a full run is planned to send (at the nominal rate;
        a rate shape changes the real count, which the manifest records per device)."""
        if self.count is not None:
            return self.count
        assert self.duration_s is not None
        return max(1, round(self.rate * self.duration_s))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["malformed_kinds"] = list(self.malformed_kinds)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FleetSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "malformed_kinds" in values:
            values["malformed_kinds"] = tuple(values["malformed_kinds"])
        return cls(**values)
