"""The soak run's figures and verdict from its samples (pure: no I/O, no clock).

A sample is a dict with ``t_s`` (seconds since the steady load started), ``delivered``
(records in Kafka), ``bridge_rss_mb`` and ``ack_lag`` (the bridge's cumulative
``iot_bridge_ack_lag_seconds`` bucket counts, ``le`` order, ``+Inf`` last).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results import steady_rate

# issue 18 item 3
MIN_LAST_TO_FIRST = 0.95
MAX_RSS_GROWTH = 1.1
MAX_ACK_LAG_P99_S = 1.0


def window_rate(samples: Sequence[dict[str, Any]], start_s: float, end_s: float) -> float | None:
    """Records/s into Kafka between ``start_s`` and ``end_s``, from the last sample at or before
    each (:func:`bench.results.steady_rate`): a window shorter than two sample intervals still
    has a rate."""
    return steady_rate([(s["t_s"], s["delivered"]) for s in samples], start_s, end_s)


def window_rss(samples: Sequence[dict[str, Any]], start_s: float, end_s: float) -> float | None:
    """The median bridge RSS (MiB) of the samples in a window (one spike moves nothing)."""
    values = [
        s["bridge_rss_mb"]
        for s in samples
        if start_s - 1e-9 <= s["t_s"] <= end_s + 1e-9 and s.get("bridge_rss_mb") is not None
    ]
    return statistics.median(values) if values else None


def bucket_quantile(bounds: Sequence[float], counts: Sequence[float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile ``q`` of a histogram given as cumulative
    counts per ``le`` bound (``+Inf`` last, as Prometheus exports it); None: no observations.
    An upper bound, never an interpolation: "p99 <= 0.01 s"."""
    total = counts[-1] if counts else 0
    if total <= 0:
        return None
    rank = q * total
    for bound, n in zip(bounds, counts, strict=False):
        if n >= rank:
            return bound
    return math.inf


def delta(later: Sequence[float], earlier: Sequence[float]) -> list[float]:
    return [a - b for a, b in zip(later, earlier, strict=True)]


@dataclass
class Verdict:
    ok: bool
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SoakFigures:
    first_rate: float | None
    last_rate: float | None
    rate_ratio: float | None
    rss_first_mb: float | None
    rss_last_mb: float | None
    rss_ratio: float | None
    ack_lag_p50_s: float | None
    ack_lag_p99_s: float | None
    acked_in_run: float


def figures(
    samples: Sequence[dict[str, Any]], bounds: Sequence[float], duration_s: float, window_s: float
) -> SoakFigures:
    """First vs last window of ``window_s`` within ``[0, duration_s]``; the ack lag over the run
    (the last sample's counts minus the first's)."""
    first_rate = window_rate(samples, 0.0, window_s)
    last_rate = window_rate(samples, duration_s - window_s, duration_s)
    rss_first = window_rss(samples, 0.0, window_s)
    rss_last = window_rss(samples, duration_s - window_s, duration_s)
    lagged = [s for s in samples if s.get("ack_lag")]
    lag = delta(lagged[-1]["ack_lag"], lagged[0]["ack_lag"]) if len(lagged) >= 2 else []
    return SoakFigures(
        first_rate=first_rate,
        last_rate=last_rate,
        rate_ratio=last_rate / first_rate if first_rate and last_rate is not None else None,
        rss_first_mb=rss_first,
        rss_last_mb=rss_last,
        rss_ratio=rss_last / rss_first if rss_first and rss_last is not None else None,
        ack_lag_p50_s=bucket_quantile(bounds, lag, 0.5) if lag else None,
        ack_lag_p99_s=bucket_quantile(bounds, lag, 0.99) if lag else None,
        acked_in_run=lag[-1] if lag else 0.0,
    )


def verdict(
    fig: SoakFigures, lost: int | None, offered: float, delivered_rate: float | None
) -> Verdict:
    """Issue 18's soak targets; ``offered``/``delivered_rate`` say whether the load was carried."""
    out: list[str] = []
    if fig.rate_ratio is None:
        out.append("no throughput in the first or last window")
    elif fig.rate_ratio < MIN_LAST_TO_FIRST:
        out.append(f"last window's rate {fig.rate_ratio:.3f} of the first (< {MIN_LAST_TO_FIRST})")
    if fig.rss_ratio is None:
        out.append("no bridge RSS samples")
    elif fig.rss_ratio > MAX_RSS_GROWTH:
        out.append(f"bridge RSS grew {fig.rss_ratio:.2f}x (> {MAX_RSS_GROWTH})")
    if fig.ack_lag_p99_s is None:
        out.append("no ack lag observed (no QoS 1 acknowledgements?)")
    elif fig.ack_lag_p99_s >= MAX_ACK_LAG_P99_S:
        out.append(f"ack lag p99 {fig.ack_lag_p99_s:g} s (>= {MAX_ACK_LAG_P99_S:g} s)")
    if lost is None:
        out.append("not verified")
    elif lost:
        out.append(f"{lost:,} messages lost")
    if delivered_rate is not None and delivered_rate < 0.95 * offered:
        out.append(f"carried {delivered_rate:,.0f} of {offered:,.0f} msgs/s offered")
    return Verdict(ok=not out, failures=out)


def timeline(
    samples: Sequence[dict[str, Any]], bounds: Sequence[float]
) -> list[dict[str, float | None]]:
    """Per sample interval: records/s into Kafka, bridge RSS, ack lag p99 (upper bound)."""
    rows: list[dict[str, float | None]] = []
    for before, after in itertools.pairwise(samples):
        dt = after["t_s"] - before["t_s"]
        lag = (
            delta(after["ack_lag"], before["ack_lag"])
            if after.get("ack_lag") and before.get("ack_lag")
            else []
        )
        p99 = bucket_quantile(bounds, lag, 0.99) if lag else None
        rows.append(
            {
                "t_s": after["t_s"],
                "msgs_per_s": (after["delivered"] - before["delivered"]) / dt if dt > 0 else None,
                "bridge_rss_mb": after.get("bridge_rss_mb"),
                "bridge_cpu": after.get("bridge_cpu"),
                "ack_lag_p99_s": None if p99 is None or math.isinf(p99) else p99,
            }
        )
    return rows
