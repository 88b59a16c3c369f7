"""Pure result accounting for the benchmark: percentiles, rates, seq checks, ratios, tables.

Nothing here touches a network or a process; the runners feed it numbers and records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks.

    Same definition as numpy's default (``method="linear"``); None for no values.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0-100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    frac = pos - lo
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * frac)


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, or None when either is unknown or the reference is not positive."""
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def steady_rate(samples: Sequence[tuple[float, int]], start: float, end: float) -> float | None:
    """Messages per second between times ``start`` and ``end`` from (time, cumulative count).

    Uses the last sample at or before each bound (the counter is a step function), so a warm-up
    before ``start`` and the drain after ``end`` are left out. None when the window holds fewer
    than two samples or no time passed.
    """
    before_start = [s for s in samples if s[0] <= start]
    before_end = [s for s in samples if s[0] <= end]
    if not before_start or not before_end:
        return None
    t0, c0 = before_start[-1]
    t1, c1 = before_end[-1]
    if t1 <= t0:
        return None
    return (c1 - c0) / (t1 - t0)


@dataclass
class SeqCheck:
    """What a consumer-side check found, keyed by device and seq."""

    expected: int = 0
    received: int = 0
    distinct: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    unexpected: int = 0
    devices_multi_partition: int = 0

    @property
    def clean(self) -> bool:
        return self.lost == 0 and self.unexpected == 0


def check_sequences(
    records: Iterable[tuple[str, int, int]], expected_counts: Mapping[str, int]
) -> SeqCheck:
    """Account for records ``(device, seq, partition)`` in consumption order.

    ``expected_counts[device] = n`` means the publisher sent seq 0..n-1 for that device.
    - lost: expected (device, seq) pairs never seen;
    - duplicates: records beyond the first of a (device, seq);
    - reordered: records whose seq is below a seq already seen for the same device in the
      same partition (order within a partition is what Kafka consumers get);
    - unexpected: records for an unknown device or a seq outside 0..n-1;
    - devices_multi_partition: devices whose records span more than one partition.
    """
    seen: dict[str, set[int]] = {}
    high: dict[tuple[str, int], int] = {}
    partitions: dict[str, set[int]] = {}
    out = SeqCheck(expected=sum(expected_counts.values()))
    for device, seq, partition in records:
        out.received += 1
        n = expected_counts.get(device)
        if n is None or not 0 <= seq < n:
            out.unexpected += 1
            continue
        device_seen = seen.setdefault(device, set())
        if seq in device_seen:
            out.duplicates += 1
        else:
            device_seen.add(seq)
        key = (device, partition)
        top = high.get(key)
        if top is not None and seq < top:
            out.reordered += 1
        else:
            high[key] = seq
        partitions.setdefault(device, set()).add(partition)
    out.distinct = sum(len(s) for s in seen.values())
    out.lost = out.expected - out.distinct
    out.devices_multi_partition = sum(1 for p in partitions.values() if len(p) > 1)
    return out


@dataclass
class RunResult:
    """One contender measured in one scenario. None = not measured / not applicable."""

    contender: str
    scenario: str  # "throughput", "latency", "latency-low", "scaling" or "warmup"
    payload_bytes: int
    devices: int
    qos: int
    processes: int = 1
    offered_rate: float | None = None
    duration_s: float | None = None
    published: int | None = None
    delivered: int | None = None
    msgs_per_s: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    # our bridge's latency in two legs (bench.kafka_side.Verification): publish -> bridge and
    # bridge -> Kafka append, p50 / p99 of each
    to_bridge_p50_ms: float | None = None
    to_bridge_p99_ms: float | None = None
    to_kafka_p50_ms: float | None = None
    to_kafka_p99_ms: float | None = None
    cpu_s: float | None = None
    cpu_s_per_million: float | None = None
    peak_rss_mb: float | None = None
    broker_cpu_s: float | None = None  # Mosquitto's CPU seconds during the run (every shard's)
    front_cpu_s: float | None = None  # HAProxy's, in front of the MQTT shards (None: no shards)
    shards: int = 1  # Mosquitto shards behind HAProxy (`--mqtt-shards N`; 1: one Mosquitto)
    load_cpu_s: float | None = None  # the publisher processes' CPU seconds
    kafka_cpu_s: float | None = None  # the Kafka broker's CPU seconds
    machine_cpu_s: float | None = None  # all cores' busy seconds (/proc/stat, any process)
    lost: int | None = None
    duplicates: int | None = None
    reordered: int | None = None
    devices_multi_partition: int | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    curve_key: str | None = None  # its delivered-over-time samples in the run's "curves"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def cpu_per_million(cpu_s: float | None, messages: int | None) -> float | None:
    """CPU seconds per million messages, None when either is unknown or nothing moved."""
    if cpu_s is None or not messages:
        return None
    return cpu_s / messages * 1_000_000


def fmt_number(value: object, digits: int = 0) -> str:
    """A table cell: "-" for unknown, thousands separators, ``digits`` decimals for floats."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def md_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def md_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: the head, the separator, one line per row."""
    return [md_row(head), "|" + "---|" * len(head), *(md_row(row) for row in rows)]


def find(
    results: Iterable[RunResult],
    contender: str,
    scenario: str,
    payload_bytes: int | None = None,
    *,
    processes: int = 1,
    devices: int | None = None,
) -> RunResult | None:
    """The first result matching the given keys (payload/devices None = any)."""
    for r in results:
        if (
            r.contender == contender
            and r.scenario == scenario
            and r.processes == processes
            and (payload_bytes is None or r.payload_bytes == payload_bytes)
            and (devices is None or r.devices == devices)
        ):
            return r
    return None


LIMIT = "mosquitto-limit"
OURS = "iot-bridge-qos1"
LOW_LOAD = "latency-low"  # the latency scenario at 1 % of our maximum
WARMUP = "warmup"  # the unmeasured run before the first round (shown, never counted)
CHECK_COLUMNS = ("lost", "dup", "reordered")  # what reading the topic back found
