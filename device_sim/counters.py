"""What the devices count: live :class:`Stats` per worker, and each device's :class:`DeviceRecord`.

``Stats`` feed the progress view (summed over workers by :func:`merge_snapshots`); the records
become the manifest's ``devices`` and ``injections`` (see :mod:`device_sim.manifest_builder`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from device_sim import manifest as manifest_io


@dataclass
class Stats:
    """Counters of one worker (summed over workers for the progress view)."""

    connected: int = 0
    connects: int = 0
    published: int = 0
    telemetry: int = 0
    malformed: int = 0
    events: int = 0
    awaiting_ack: int = 0
    acked: int = 0
    errors: int = 0
    connect_failures: int = 0
    commands: int = 0
    replies: int = 0
    finished: int = 0
    first_publish: float | None = None  # epoch seconds
    last_publish: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return asdict(self)


# the publish span of the fleet: the earliest first and the latest last publish of any worker
_EXTREMES: dict[str, Callable[[float, float], float]] = {"first_publish": min, "last_publish": max}


def merge_snapshots(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum the counters; the earliest ``first_publish`` and the latest ``last_publish``."""
    out: dict[str, Any] = {}
    for snap in snaps:
        for key, value in snap.items():
            if key in _EXTREMES:
                if value is None:
                    out.setdefault(key, None)
                else:
                    prev = out.get(key)
                    out[key] = value if prev is None else _EXTREMES[key](prev, value)
            else:
                out[key] = out.get(key, 0) + value
    return out


@dataclass
class DeviceRecord:
    """What one device did, for the manifest."""

    device: str
    groups: list[str]
    qos: int
    skew_ms: int
    silent: bool
    sent: int = 0
    unacked: list[int] = field(default_factory=list)
    connects: int = 0
    failed: str | None = None
    commands: int = 0
    replied_ok: int = 0
    replied_error: int = 0
    ignored: int = 0
    events_sent: int = 0  # event seqs 1..events_sent were published
    events_unacked: list[int] = field(default_factory=list)
    event_types: dict[str, int] = field(default_factory=dict)  # type -> events sent
    injections: dict[str, list[dict[str, Any]]] = field(
        default_factory=manifest_io.empty_injections
    )
