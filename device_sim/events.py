"""What a device reports on ``devices/{id}/events`` (pure, seeded, no clock, no I/O).

An event is ``{"ts", "seq", "type", "data"}`` (the design's contract, QoS 1) with its own
per-device ``seq`` (1, 2, ... over the device's events, apart from telemetry's). ``data.run``
carries the run id so the verifier can tell the run's events from others. Kinds:

- ``alarm``: a telemetry reading was anomalous (tied to the anomaly injection);
- ``restart``: the first slot after a churn reconnect (the device came back);
- ``door_open`` / ``door_closed`` / ``button_press``: spontaneous, with probability
  ``event_rate`` per telemetry slot, the kind drawn from the device's ``events`` stream.

Events are on when ``event_rate > 0``; alarms and restarts come only then too.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

SPONTANEOUS = ("door_open", "door_closed", "button_press")
EVENT_TYPES = ("alarm", "restart", *SPONTANEOUS)


class EventSource:
    """One device's events: numbering, the spontaneous draws and the payloads."""

    __slots__ = ("_rng", "device_id", "rate", "run_id", "seq", "topic")

    def __init__(self, device_id: str, run_id: str, rate: float, rng: random.Random) -> None:
        self.device_id = device_id
        self.run_id = run_id
        self.rate = rate
        self.topic = f"devices/{device_id}/events"
        self._rng = rng
        self.seq = 0  # last event seq produced

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def spontaneous(self) -> str | None:
        """The spontaneous event of this slot, if any (two draws per slot, always)."""
        draw, kind = self._rng.random(), self._rng.random()
        if self.rate > 0 and draw < self.rate:
            return SPONTANEOUS[int(kind * len(SPONTANEOUS))]
        return None

    def build(self, kind: str, ts: int, data: dict[str, Any]) -> tuple[int, bytes]:
        """The next event's seq and payload."""
        self.seq += 1
        doc = {"ts": ts, "seq": self.seq, "type": kind, "data": {"run": self.run_id, **data}}
        return self.seq, orjson.dumps(doc)
