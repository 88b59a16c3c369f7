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
    broker_cpu_s: float | None = None  # Mosquitto's CPU seconds during the run
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


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


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


def _check_cells(r: RunResult) -> list[str]:
    return [fmt_number(r.lost), fmt_number(r.duplicates), fmt_number(r.reordered)]


def throughput_runs(
    results: Iterable[RunResult], contender: str, payload_bytes: int
) -> list[RunResult]:
    """Every throughput run (the best and its repeats) of a contender, in run order, without
    failed ones: round i of one contender pairs with round i of another."""
    return [
        r
        for r in results
        if r.contender == contender
        and r.payload_bytes == payload_bytes
        and r.processes == 1
        and r.scenario in ("throughput", "throughput-repeat")
        and r.error is None
        and r.msgs_per_s is not None
    ]


def value_range(values: Iterable[float | None]) -> tuple[float, float, int] | None:
    """(min, max, count) of the known values; None if there are none."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return min(known), max(known), len(known)


def paired_ratios(runs: Sequence[RunResult], refs: Sequence[RunResult]) -> list[float]:
    """msgs/s of run i over reference run i (same round), for every pair both have."""
    out = []
    for r, ref in zip(runs, refs, strict=False):
        v = ratio(r.msgs_per_s, ref.msgs_per_s)
        if v is not None:
            out.append(v)
    return out


def fmt_range(rng: tuple[float, float, int] | None, digits: int = 0) -> str:
    """``min-max`` (a single value when they agree or there was one run); ``-`` if unknown."""
    if rng is None:
        return "-"
    lo, hi, _n = rng
    if fmt_number(lo, digits) == fmt_number(hi, digits):
        return fmt_number(lo, digits)
    return f"{fmt_number(lo, digits)}-{fmt_number(hi, digits)}"


def spread_table(results: Sequence[RunResult], payloads: Sequence[int]) -> str:
    """Markdown: per contender and payload, min-max over its repeated throughput runs of
    msgs/s, the ratio to the same round's limit and to ours, CPU per million and peak RSS."""
    contenders: list[str] = []
    for res in results:
        if res.scenario.startswith("throughput") and res.contender not in contenders:
            contenders.append(res.contender)
    head = [
        "contender",
        "payload B",
        "runs",
        "msgs/s min-max",
        "vs limit min-max (same round)",
        "vs ours min-max (same round)",
        "CPU s / M msgs min-max",
        "peak RSS MB min-max",
    ]
    rows: list[list[str]] = []
    for name in contenders:
        for p in payloads:
            runs = throughput_runs(results, name, p)
            if not runs:
                continue
            limit_name = LIMIT + "-qos0" if runs[0].qos == 0 else LIMIT
            limits = throughput_runs(results, limit_name, p) or throughput_runs(results, LIMIT, p)
            ours = throughput_runs(results, OURS, p)
            rows.append(
                [
                    name,
                    str(p),
                    str(len(runs)),
                    fmt_range(value_range(r.msgs_per_s for r in runs)),
                    fmt_range(value_range(paired_ratios(runs, limits)), 2),
                    fmt_range(value_range(paired_ratios(runs, ours)), 2),
                    fmt_range(value_range(r.cpu_s_per_million for r in runs), 1),
                    fmt_range(value_range(r.peak_rss_mb for r in runs)),
                ]
            )
    return "\n".join(md_table(head, rows))


def throughput_table(results: Sequence[RunResult], payloads: Sequence[int]) -> str:
    """Markdown: one row per contender, msgs/s per payload with ratios, costs and checks."""
    contenders: list[str] = []
    for res in results:
        if res.scenario.startswith("throughput") and res.contender not in contenders:
            contenders.append(res.contender)
    head = ["contender"]
    for p in payloads:
        head += [f"msgs/s {p} B", f"vs limit {p} B", f"vs ours {p} B"]
    head += [
        "p50 ms (half load)",
        "p99 ms (half load)",
        "p50 / p99 ms (1 % load)",
        "CPU s / M msgs",
        "peak RSS MB",
        *CHECK_COLUMNS,
    ]
    rows: list[list[str]] = []
    for name in contenders:
        row = [name]
        cpu_values: list[float] = []
        rss_values: list[float] = []
        lost = dup = reord = 0
        known_checks = False
        for p in payloads:
            r = find(results, name, "throughput", p)
            limit = find(results, LIMIT, "throughput", p)
            if r is not None and r.qos == 0:
                limit = find(results, LIMIT + "-qos0", "throughput", p) or limit
            ours = find(results, OURS, "throughput", p)
            rate = r.msgs_per_s if r else None
            row += [
                fmt_number(rate) if r is None or r.error is None else "failed",
                _fmt_ratio(ratio(rate, limit.msgs_per_s if limit else None)),
                _fmt_ratio(ratio(rate, ours.msgs_per_s if ours else None)),
            ]
            if r is not None:
                if r.cpu_s_per_million is not None:
                    cpu_values.append(r.cpu_s_per_million)
                if r.peak_rss_mb is not None:
                    rss_values.append(r.peak_rss_mb)
                if r.lost is not None:
                    known_checks = True
                    lost += r.lost
                    dup += r.duplicates or 0
                    reord += r.reordered or 0
        lat = find(results, name, "latency")
        low = find(results, name, LOW_LOAD)
        row += [
            fmt_number(lat.latency_p50_ms, 1) if lat else "-",
            fmt_number(lat.latency_p99_ms, 1) if lat else "-",
            f"{fmt_number(low.latency_p50_ms, 1)} / {fmt_number(low.latency_p99_ms, 1)}"
            if low
            else "-",
            fmt_number(max(cpu_values), 1) if cpu_values else "-",
            fmt_number(max(rss_values), 0) if rss_values else "-",
        ]
        for extra in (lat, low):
            if extra is not None and extra.lost is not None:
                known_checks = True
                lost += extra.lost
                dup += extra.duplicates or 0
                reord += extra.reordered or 0
        row += (
            [fmt_number(lost), fmt_number(dup), fmt_number(reord)]
            if known_checks
            else ["-", "-", "-"]
        )
        rows.append(row)
    return "\n".join(md_table(head, rows))


def scaling_table(results: Sequence[RunResult]) -> str:
    """Markdown: our bridge's throughput by processes and devices, ratio to the 1-process run."""
    runs = [r for r in results if r.contender == OURS and r.scenario in ("throughput", "scaling")]
    runs.sort(key=lambda r: (r.payload_bytes, r.devices, r.processes))
    head = [
        "payload B",
        "devices",
        "bridge processes",
        "msgs/s",
        "vs 1 process, 1,000 devices",
        "CPU s / M msgs",
        *CHECK_COLUMNS,
    ]
    rows: list[list[str]] = []
    for r in runs:
        base = find(results, OURS, "throughput", r.payload_bytes)
        rows.append(
            [
                str(r.payload_bytes),
                f"{r.devices:,}",
                str(r.processes),
                fmt_number(r.msgs_per_s) if r.error is None else "failed",
                _fmt_ratio(ratio(r.msgs_per_s, base.msgs_per_s if base else None)),
                fmt_number(r.cpu_s_per_million, 1),
                *_check_cells(r),
            ]
        )
    return "\n".join(md_table(head, rows))


def runs_table(results: Sequence[RunResult]) -> str:
    """Markdown: every run with its raw figures (the audit trail under the summary)."""
    head = [
        "scenario",
        "contender",
        "payload B",
        "devices",
        "QoS",
        "procs",
        "offered/s",
        "published",
        "delivered",
        "msgs/s",
        "p50 ms",
        "p99 ms",
        "CPU s",
        "Mosquitto CPU s",
        "publishers CPU s",
        "Kafka CPU s",
        "machine busy CPU s",
        "RSS MB",
        "lost",
        "dup",
        "reord",
        "notes",
    ]
    rows: list[list[str]] = []
    for r in results:
        notes = list(r.notes)
        if r.error:
            notes.insert(0, f"error: {r.error}")
        rows.append(
            [
                r.scenario,
                r.contender,
                str(r.payload_bytes),
                f"{r.devices:,}",
                str(r.qos),
                str(r.processes),
                fmt_number(r.offered_rate),
                fmt_number(r.published),
                fmt_number(r.delivered),
                fmt_number(r.msgs_per_s),
                fmt_number(r.latency_p50_ms, 1),
                fmt_number(r.latency_p99_ms, 1),
                fmt_number(r.cpu_s, 1),
                fmt_number(r.broker_cpu_s, 1),
                fmt_number(r.load_cpu_s, 1),
                fmt_number(r.kafka_cpu_s, 1),
                fmt_number(r.machine_cpu_s, 1),
                fmt_number(r.peak_rss_mb, 0),
                *_check_cells(r),
                "; ".join(notes).replace("|", "/"),
            ]
        )
    return "\n".join(md_table(head, rows))
