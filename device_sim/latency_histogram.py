"""A latency histogram in integer milliseconds with a stated error bound (pure).

Latencies here are differences of epoch-millisecond integers, so a histogram keyed by the
millisecond is exact: nearest-rank percentiles over it equal those over the sorted values.
To bound its size whatever the spread, a value is kept exact while ``|v| < 2**EXACT_BITS`` ms
(8.192 s); beyond that it is rounded toward zero to its top ``EXACT_BITS`` significant bits
(an HDR-histogram-style log-linear bucket). So:

- every count, the maximum and every percentile below 8,192 ms are exact;
- a percentile at or above 8,192 ms is reported less than ``|v| / 2**(EXACT_BITS - 1)``
  nearer zero than the true value (under 0.025 %: less than 2 ms off at 10 s, 128 ms at 15 min);
- the histogram holds at most 16,383 exact keys plus 4,096 per power of two beyond 8 s on
  either side (a day of spread: under 100,000 keys), however many values were added; typical
  runs need a few thousand.

Bucket rounding is monotonic, so the reported percentile is the bucket of the true one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

EXACT_BITS = 13
EXACT_BELOW = 1 << EXACT_BITS  # |v| below this is kept exact
RELATIVE_ERROR = 1.0 / (1 << (EXACT_BITS - 1))  # bound on |reported - true| / |true|


def bucket(value: int) -> int:
    """The key ``value`` is counted under (itself when ``|value| < EXACT_BELOW``)."""
    if -EXACT_BELOW < value < EXACT_BELOW:
        return value
    magnitude = -value if value < 0 else value
    shift = magnitude.bit_length() - EXACT_BITS
    rounded = (magnitude >> shift) << shift
    return -rounded if value < 0 else rounded


class LatencyHistogram:
    """Counts of latencies by (bucketed) millisecond, plus the exact maximum."""

    __slots__ = ("count", "counts", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.max: int | None = None

    def add(self, value: int) -> None:
        key = value if -EXACT_BELOW < value < EXACT_BELOW else bucket(value)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1
        self.count += 1
        if self.max is None or value > self.max:
            self.max = value

    def update(self, values: Iterable[int]) -> None:
        """Add every value: the verifier's hot path (a batch of a consumer's rows), counted in C
        by ``Counter`` first, so a batch costs one dict update per distinct value."""
        batch = values if isinstance(values, list) else list(values)
        if not batch:
            return
        counts = self.counts
        for value, n in Counter(batch).items():
            key = value if -EXACT_BELOW < value < EXACT_BELOW else bucket(value)
            counts[key] = counts.get(key, 0) + n
        self.count += len(batch)
        top = max(batch)
        if self.max is None or top > self.max:
            self.max = top

    def merge(self, other: LatencyHistogram) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        self.count += other.count
        if other.max is not None and (self.max is None or other.max > self.max):
            self.max = other.max

    def percentiles(self, qs: Iterable[float]) -> list[float]:
        """Nearest-rank percentiles (``q`` in 0..100), as :func:`accounting.percentile` on the
        sorted values would give them (exactly below ``EXACT_BELOW`` ms)."""
        if not self.count:
            raise ValueError("percentile of nothing")
        ranks = [max(1, min(self.count, math.ceil(q / 100.0 * self.count))) for q in qs]
        out = [0.0] * len(ranks)
        order = sorted(range(len(ranks)), key=lambda i: ranks[i])
        pending = 0
        seen = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            while pending < len(order) and ranks[order[pending]] <= seen:
                out[order[pending]] = float(key)
                pending += 1
            if pending == len(order):
                break
        return out
