"""MR's ``/metrics`` JSON (contract §6; pure): ``{"<name>": {"summary": text, "raw": value}}``.

Names as MR's DMaaPMetricsSet: version, startTime, upTime, recv/send totals and events per
second over three windows (ours: instant 10 s, short 1 min, long 10 min), the consumer cache's
hits, misses, claims and timeouts, and fanOut (messages sent per message received).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

WINDOWS_S: Final = {"Instant": 10, "Short": 60, "Long": 600}


class RateMeter:
    """Events per second over the last N seconds, in one-second buckets (at most 600 kept)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: deque[list[int]] = deque()  # [second, count]
        self.total = 0

    def add(self, count: int = 1) -> None:
        second = int(self._clock())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += count
        else:
            self._buckets.append([second, count])
        while self._buckets and self._buckets[0][0] <= second - max(WINDOWS_S.values()):
            self._buckets.popleft()
        self.total += count

    def rate(self, window_s: int) -> float:
        now = int(self._clock())
        return sum(c for s, c in self._buckets if s > now - window_s) / window_s


@dataclass(frozen=True, slots=True)
class CacheCounts:
    hits: int
    misses: int
    claims: int
    timeouts: int


def _entry(summary: str, raw: Any) -> dict[str, Any]:
    return {"summary": summary, "raw": raw}


def render(
    version: str,
    *,
    started_epoch_s: float,
    now_epoch_s: float,
    recv: RateMeter,
    send: RateMeter,
    cache: CacheCounts,
) -> dict[str, dict[str, Any]]:
    up = max(0, int(now_epoch_s - started_epoch_s))
    out = {
        "version": _entry(f"Version {version}", version),
        "startTime": _entry(
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_epoch_s)),
            int(started_epoch_s * 1000),
        ),
        "upTime": _entry(f"{up} seconds", up),
        "recvTotalEvents": _entry(f"{recv.total} events", recv.total),
        "sendTotalEvents": _entry(f"{send.total} events", send.total),
        "kafkaConsumerCacheHit": _entry(f"{cache.hits} hits", cache.hits),
        "kafkaConsumerCacheMiss": _entry(f"{cache.misses} misses", cache.misses),
        "kafkaConsumerClaims": _entry(f"{cache.claims} consumers", cache.claims),
        "kafkaConsumerTimeouts": _entry(f"{cache.timeouts} idle closes", cache.timeouts),
        "fanOut": _entry(
            "messages sent per message received",
            round(send.total / recv.total, 3) if recv.total else 0.0,
        ),
    }
    for side, meter in (("recv", recv), ("send", send)):
        for label, window in WINDOWS_S.items():
            eps = round(meter.rate(window), 3)
            out[f"{side}Eps{label}"] = _entry(f"{eps} events/s over {window} s", eps)
    return out


def wants_json(accept: str | None) -> bool:
    """``/metrics`` answers MR's JSON to a client that asks for JSON; Prometheus otherwise."""
    return bool(accept) and "application/json" in (accept or "").lower()
