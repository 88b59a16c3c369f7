"""Latency percentiles over time: one :class:`LatencyHistogram` per window of Kafka time (pure).

For long fleet runs (``make bench-fleet``): how latency moved while the run went on, not only
its overall percentiles. Memory is O(windows x distinct ms per window), bounded by the run's
length over the window, never by its record count.
"""

from __future__ import annotations

from typing import Any

from device_sim.latency_histogram import LatencyHistogram


class LatencyTimeline:
    """Latencies grouped by the window of their Kafka record timestamp."""

    __slots__ = ("window_ms", "windows")

    def __init__(self, window_ms: int) -> None:
        if window_ms <= 0:
            raise ValueError("window_ms must be > 0")
        self.window_ms = window_ms
        self.windows: dict[int, LatencyHistogram] = {}

    def add(self, kafka_ts: int, latency_ms: int) -> None:
        start = kafka_ts - kafka_ts % self.window_ms
        hist = self.windows.get(start)
        if hist is None:
            hist = self.windows[start] = LatencyHistogram()
        hist.add(latency_ms)

    def merge(self, other: LatencyTimeline) -> None:
        for start, hist in other.windows.items():
            mine = self.windows.get(start)
            if mine is None:
                mine = self.windows[start] = LatencyHistogram()
            mine.merge(hist)

    def rows(self) -> list[dict[str, Any]]:
        """One row per window in time order: start (epoch ms), count, p50/p95/p99, max."""
        out: list[dict[str, Any]] = []
        for start in sorted(self.windows):
            hist = self.windows[start]
            p50, p95, p99 = hist.percentiles((50, 95, 99))
            out.append(
                {
                    "start_ms": start,
                    "window_ms": self.window_ms,
                    "count": hist.count,
                    "p50_ms": p50,
                    "p95_ms": p95,
                    "p99_ms": p99,
                    "max_ms": float(hist.max) if hist.max is not None else None,
                }
            )
        return out
