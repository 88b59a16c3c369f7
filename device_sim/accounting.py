"""The verifier's accounting: what a run sent (its manifest) against what Kafka holds (pure).

Input: the expectations taken from the manifest and the records read back, streamed into an
:class:`Accountant` one batch of rows at a time. Output: a :class:`Report` with loss,
duplicates, order, partitions, DLQ counts and latency, which can be taken at any point (a
running report) and again at the end. No I/O here; :mod:`device_sim.verifier` does the reading.

Memory is O(devices), not O(records): per device the accountant keeps one bit per sent seq
(:mod:`device_sim.seq_bitmap`), the highest seq seen, its partitions and a few counters; the
latencies go into :class:`~device_sim.latency_histogram.LatencyHistogram` (exact in integer
ms below 8,192 ms, within 0.025 % above). Nothing of a record is kept once it is counted.

Definitions (per device, records in log order: each partition in offset order; the verifier
feeds them as Kafka hands them over, :func:`account` sorts a list by partition then offset):

- *missing*: a seq in ``1..sent`` never seen. It is *acknowledged* when the device sent it with
  QoS 1 and Mosquitto acknowledged it (the manifest lists the unacknowledged seqs). QoS 0 sends
  are never acknowledged.
- *duplicate*: a record whose seq was already seen (at-least-once redelivery).
- *order violation*: a record with a new seq lower than the highest seq seen before it. For a
  device confined to one partition (the only passing case) this does not depend on how the
  partitions interleave; for a device spanning partitions it follows the feeding order.
- *unexpected*: a record whose seq is outside ``1..sent`` or whose device is not in the manifest.
- *latency*: Kafka record timestamp minus the device ``ts`` corrected by the device's known clock
  skew; injected late / out-of-order messages are left out (their ``ts`` is deliberately wrong).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from device_sim import seq_bitmap
from device_sim.latency_histogram import LatencyHistogram
from device_sim.latency_timeline import LatencyTimeline


@dataclass(frozen=True, slots=True)
class TelemetryRecord:
    """One telemetry record of the run, as read from Kafka."""

    device: str
    seq: int
    partition: int
    offset: int
    kafka_ts: int  # record timestamp (epoch ms)
    ts: int | None = None  # the device's ts in the payload
    received_at: int | None = None  # the bridge's received_at header (epoch ms)


@dataclass(frozen=True, slots=True)
class DlqRecord:
    """One DLQ record attributed to the run."""

    device: str | None
    error: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeviceExpectation:
    """What one device sent, from the manifest."""

    sent: int  # telemetry seqs 1..sent were published
    qos: int = 1
    unacked: frozenset[int] = frozenset()  # QoS 1 seqs Mosquitto never acknowledged
    skew_ms: int = 0
    skip_latency: frozenset[int] = frozenset()  # seqs with deliberately wrong ts


@dataclass(frozen=True, slots=True)
class Expectations:
    """The whole run's expectations."""

    devices: Mapping[str, DeviceExpectation]
    dlq: Mapping[str, int] = field(default_factory=dict)  # error code -> count
    started_at_ms: int | None = None
    ended_at_ms: int | None = None
    # The run is inconclusive (and fails) when more than this share of the telemetry sent was
    # never acknowledged and never arrived: the simulator did not deliver its planned load
    # (see _verdict). None: no such rule (what the old verifier did).
    max_unacked_fraction: float | None = None


@dataclass
class Latency:
    count: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


@dataclass
class DeviceProblems:
    device: str
    missing: list[str] = field(default_factory=list)  # seq ranges "a-b"
    missing_acked: int = 0
    duplicates: int = 0
    order_violations: int = 0
    partitions: list[int] = field(default_factory=list)


@dataclass
class Report:
    """The verifier's findings; :attr:`ok` is False when anything acknowledged is missing,
    a device spans partitions, or the DLQ holds fewer records of a code than were sent."""

    devices_expected: int = 0
    devices_seen: int = 0
    sent: int = 0
    received: int = 0
    unique: int = 0
    missing: int = 0
    missing_acked: int = 0
    missing_unacked: int = 0
    duplicates: int = 0
    order_violations: int = 0
    unexpected: int = 0
    devices_spanning_partitions: list[str] = field(default_factory=list)
    partitions_per_device: dict[str, int] = field(default_factory=dict)  # "1" -> n devices
    dlq_expected: dict[str, int] = field(default_factory=dict)
    dlq_received: dict[str, int] = field(default_factory=dict)
    dlq_missing: dict[str, int] = field(default_factory=dict)
    dlq_extra: dict[str, int] = field(default_factory=dict)
    latency: Latency = field(default_factory=Latency)
    bridge_latency: Latency = field(default_factory=Latency)
    throughput_sent_per_s: float | None = None
    throughput_received_per_s: float | None = None
    problems: list[DeviceProblems] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # the events' own accounting (device_sim.event_accounting), None when the run sent none
    events: dict[str, Any] | None = None
    # per window of Kafka time, when asked for (Accountant(timeline_ms=...)); see latency_timeline
    latency_timeline: list[dict[str, Any]] = field(default_factory=list)
    # with Expectations.max_unacked_fraction: missing_unacked / sent, and whether it was beyond
    # the threshold (the run did not test what it meant to; it fails as inconclusive)
    unacked_fraction: float | None = None
    max_unacked_fraction: float | None = None
    inconclusive: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``q`` in 0..100)."""
    if not sorted_values:
        raise ValueError("percentile of nothing")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def latency_of(histogram: LatencyHistogram) -> Latency:
    if not histogram.count or histogram.max is None:
        return Latency()
    p50, p95, p99 = histogram.percentiles((50, 95, 99))
    return Latency(
        count=histogram.count, p50_ms=p50, p95_ms=p95, p99_ms=p99, max_ms=float(histogram.max)
    )


def ranges(numbers: Iterable[int]) -> list[str]:
    """``[1, 2, 3, 7, 9, 10]`` -> ``["1-3", "7", "9-10"]``."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return out


# A telemetry row as the accountant takes it:
# (device, seq, partition, kafka_ts, device ts or None, bridge received_at or None)
Row = tuple[str, int, int, int, int | None, int | None]


class _Device:
    """What the verdict needs of one device, and nothing per record."""

    __slots__ = (
        "duplicates",
        "exp",
        "highest",
        "more_partitions",
        "order",
        "partition",
        "records",
        "seen",
        "sent",
        "skew",
        "skip",
        "unique",
    )

    def __init__(self, exp: DeviceExpectation | None, partition: int) -> None:
        self.exp = exp
        self.sent = exp.sent if exp is not None else 0  # 0: every seq is unexpected
        self.skew = exp.skew_ms if exp is not None else 0
        self.skip = exp.skip_latency if exp is not None else frozenset()
        self.seen = seq_bitmap.new_bitmap(self.sent) if self.sent > 0 else bytearray()
        self.highest = 0
        self.unique = 0
        self.records = 0  # every record of the device, in range or not
        self.duplicates = 0
        self.order = 0
        self.partition = partition  # the first partition seen
        self.more_partitions: set[int] | None = None  # others, if any (a failure)

    def partitions(self) -> list[int]:
        if self.more_partitions is None:
            return [self.partition] if self.records else []
        return sorted({self.partition, *self.more_partitions})


class Accountant:
    """Streaming accounting of one run: feed rows with :meth:`add_telemetry` and DLQ error codes
    with :meth:`add_dlq` (each partition in offset order), ask :meth:`report` at any time."""

    def __init__(self, expected: Expectations, timeline_ms: int | None = None) -> None:
        self.expected = expected
        self.timeline = None if timeline_ms is None else LatencyTimeline(timeline_ms)
        self._devices: dict[str, _Device] = {}
        self._latency = LatencyHistogram()
        self._bridge_latency = LatencyHistogram()
        self._dlq: Counter[str] = Counter()
        self.received = 0
        self.unexpected = 0
        self._in_range = 0  # records of expected devices with seq in 1..sent (duplicates too)
        self._first_ts: int | None = None
        self._last_ts: int | None = None

    def add_telemetry(self, rows: Iterable[Row]) -> None:
        """Count ``rows``; per device they must come in log order (see the module doc)."""
        devices = self._devices
        latency = self._latency.add
        bridge_latency = self._bridge_latency.add
        timeline = None if self.timeline is None else self.timeline.add
        received = unexpected = in_range = 0
        first_ts, last_ts = self._first_ts, self._last_ts
        for device, seq, partition, kafka_ts, ts, received_at in rows:
            received += 1
            state = devices.get(device)
            if state is None:
                state = devices[device] = _Device(self.expected.devices.get(device), partition)
            elif partition != state.partition:
                if state.more_partitions is None:
                    state.more_partitions = set()
                state.more_partitions.add(partition)
            state.records += 1
            if not 1 <= seq <= state.sent:
                unexpected += 1
                continue
            in_range += 1
            if first_ts is None or kafka_ts < first_ts:
                first_ts = kafka_ts
            if last_ts is None or kafka_ts > last_ts:
                last_ts = kafka_ts
            seen = state.seen
            i = seq >> 3
            bit = 1 << (seq & 7)
            byte = seen[i]
            if byte & bit:
                state.duplicates += 1
                continue
            seen[i] = byte | bit
            state.unique += 1
            if seq < state.highest:
                state.order += 1
            else:
                state.highest = seq
            if ts is not None and (not state.skip or seq not in state.skip):
                true_ts = ts - state.skew
                latency(kafka_ts - true_ts)
                if timeline is not None:
                    timeline(kafka_ts, kafka_ts - true_ts)
                if received_at is not None:
                    bridge_latency(received_at - true_ts)
        self.received += received
        self.unexpected += unexpected
        self._in_range += in_range
        self._first_ts, self._last_ts = first_ts, last_ts

    def merge(self, other: Accountant) -> None:
        """Add what ``other`` (same expectations) counted, e.g. a worker that read other
        partitions. Exact for every device confined to one partition (each partition is read
        by one worker, in offset order); for a device spanning partitions, which fails the run
        anyway, the order violations are each side's own (Kafka gives no order between them)."""
        devices = self._devices
        for name, theirs in other._devices.items():
            mine = devices.get(name)
            if mine is None:
                devices[name] = theirs
                continue
            both = int.from_bytes(mine.seen, "little") & int.from_bytes(theirs.seen, "little")
            overlap = both.bit_count()
            mine.seen = bytearray(a | b for a, b in zip(mine.seen, theirs.seen, strict=True))
            mine.duplicates += theirs.duplicates + overlap
            mine.unique += theirs.unique - overlap
            mine.order += theirs.order
            mine.highest = max(mine.highest, theirs.highest)
            mine.records += theirs.records
            others = {theirs.partition, *(theirs.more_partitions or ())} - {mine.partition}
            if others:
                mine.more_partitions = (mine.more_partitions or set()) | others
        self._latency.merge(other._latency)
        self._bridge_latency.merge(other._bridge_latency)
        if self.timeline is not None and other.timeline is not None:
            self.timeline.merge(other.timeline)
        self._dlq.update(other._dlq)
        self.received += other.received
        self.unexpected += other.unexpected
        self._in_range += other._in_range
        firsts = [t for t in (self._first_ts, other._first_ts) if t is not None]
        lasts = [t for t in (self._last_ts, other._last_ts) if t is not None]
        self._first_ts = min(firsts) if firsts else None
        self._last_ts = max(lasts) if lasts else None

    def add_dlq(self, errors: Iterable[str]) -> None:
        """Count DLQ records of the run by their error code."""
        self._dlq.update(errors)

    @property
    def dlq_total(self) -> int:
        return self._dlq.total()

    def missing_acked(self) -> int:
        """Acknowledged seqs not seen yet (what the verifier waits for); O(devices + unacked)."""
        total = 0
        for device, exp in self.expected.devices.items():
            if exp.qos != 0:
                total += _missing_acked(exp, self._devices.get(device))
        return total

    def report(self, max_problem_devices: int = 50) -> Report:
        """The findings so far (the final report once everything was fed)."""
        expected = self.expected
        report = Report(devices_expected=len(expected.devices))
        report.received = self.received
        report.unexpected = self.unexpected
        report.devices_seen = len(self._devices)
        report.sent = sum(d.sent for d in expected.devices.values())
        partition_counts: Counter[int] = Counter()
        ranking: list[tuple[int, int, str]] = []  # (-missing acked, -missing ranges, device)
        for device in sorted(set(expected.devices) | set(self._devices)):
            exp = expected.devices.get(device)
            state = self._devices.get(device)
            n_partitions = len(state.partitions()) if state is not None else 0
            if n_partitions:
                partition_counts[n_partitions] += 1
            if n_partitions > 1:
                report.devices_spanning_partitions.append(device)
            if exp is None:
                continue
            unique = state.unique if state is not None else 0
            missing = exp.sent - unique if exp.sent > 0 else 0
            acked = 0 if exp.qos == 0 else _missing_acked(exp, state)
            report.unique += unique
            report.missing += missing
            report.missing_acked += acked
            if state is not None:
                report.duplicates += state.duplicates
                report.order_violations += state.order
            if missing or n_partitions > 1 or (state and (state.duplicates or state.order)):
                ranking.append((-acked, -_missing_runs(exp, state), device))
        report.missing_unacked = report.missing - report.missing_acked
        report.partitions_per_device = {str(k): v for k, v in sorted(partition_counts.items())}
        report.latency = latency_of(self._latency)
        report.bridge_latency = latency_of(self._bridge_latency)
        if self.timeline is not None:
            report.latency_timeline = self.timeline.rows()
        ranking.sort()
        report.problems = [
            self._problems(device, -acked) for acked, _m, device in ranking[:max_problem_devices]
        ]
        self._dlq_into(report)
        self._throughput_into(report)
        _verdict(report, expected.max_unacked_fraction)
        return report

    def _problems(self, device: str, missing_acked: int) -> DeviceProblems:
        exp = self.expected.devices[device]
        state = self._devices.get(device)
        problems = DeviceProblems(device=device, missing_acked=missing_acked)
        if state is None:
            problems.missing = ranges(range(1, exp.sent + 1))
            return problems
        problems.missing = ranges(seq_bitmap.unset(state.seen, exp.sent)) if exp.sent > 0 else []
        problems.duplicates = state.duplicates
        problems.order_violations = state.order
        problems.partitions = state.partitions()
        return problems

    def _dlq_into(self, report: Report) -> None:
        expected = self.expected.dlq
        received = self._dlq
        report.dlq_expected = dict(sorted(expected.items()))
        report.dlq_received = dict(sorted(received.items()))
        for code in sorted(set(expected) | set(received)):
            diff = received.get(code, 0) - expected.get(code, 0)
            if diff < 0:
                report.dlq_missing[code] = -diff
            elif diff > 0:
                report.dlq_extra[code] = diff

    def _throughput_into(self, report: Report) -> None:
        started, ended = self.expected.started_at_ms, self.expected.ended_at_ms
        if started is not None and ended is not None:
            span = (ended - started) / 1000.0
            if span > 0:
                report.throughput_sent_per_s = round(report.sent / span, 1)
        if self._in_range > 1 and self._first_ts is not None and self._last_ts is not None:
            span = (self._last_ts - self._first_ts) / 1000.0
            if span > 0:
                report.throughput_received_per_s = round(self._in_range / span, 1)


def _missing_runs(exp: DeviceExpectation, state: _Device | None) -> int:
    if exp.sent <= 0:
        return 0
    if state is None:
        return 1
    return seq_bitmap.unset_runs(state.seen, exp.sent)


def _missing_acked(exp: DeviceExpectation, state: _Device | None) -> int:
    """Seqs of ``1..sent`` not seen that Mosquitto acknowledged (QoS 1 devices)."""
    if exp.sent <= 0:
        return 0
    unique = state.unique if state is not None else 0
    unacked_unseen = sum(
        1
        for s in exp.unacked
        if 1 <= s <= exp.sent and (state is None or not seq_bitmap.is_set(state.seen, s))
    )
    return exp.sent - unique - unacked_unseen


def _verdict(report: Report, max_unacked_fraction: float | None = None) -> None:
    """Fails on anything acknowledged that is missing, a device spanning partitions, DLQ
    records missing. Losses never acknowledged are at-least-once's (and QoS 0's) right and do
    not fail a run, but when more than ``max_unacked_fraction`` of what was sent is missing
    that way, the simulator (or Mosquitto) did not carry the planned load: a starved simulator
    once left 338,726 of 450,000 messages unacknowledged with a verdict of OK. The run is then
    *inconclusive*, which fails it too: it did not test what it was meant to."""
    if max_unacked_fraction is not None and report.sent > 0:
        fraction = report.missing_unacked / report.sent
        report.unacked_fraction = round(fraction, 6)
        report.max_unacked_fraction = max_unacked_fraction
        if fraction > max_unacked_fraction:
            report.inconclusive = True
            report.failures.append(
                f"INCONCLUSIVE: {report.missing_unacked} of {report.sent} telemetry messages "
                f"({fraction:.2%}) were never acknowledged and never arrived, more than the "
                f"{max_unacked_fraction:.2%} allowed: the run did not deliver its planned load"
            )
    if report.missing_acked:
        report.failures.append(f"{report.missing_acked} acknowledged telemetry messages missing")
    if report.devices_spanning_partitions:
        report.failures.append(
            f"{len(report.devices_spanning_partitions)} devices span more than one partition"
        )
    if report.dlq_missing:
        report.failures.append(f"DLQ records missing by error code: {report.dlq_missing}")


def account(
    expected: Expectations,
    telemetry: Iterable[TelemetryRecord],
    dlq: Iterable[DlqRecord] = (),
    max_problem_devices: int = 50,
) -> Report:
    """The report of records already in memory (tests, the benchmark): sorts them into log
    order (partition, then offset) and streams them through an :class:`Accountant`."""
    accountant = Accountant(expected)
    ordered = sorted(telemetry, key=lambda r: (r.partition, r.offset))
    accountant.add_telemetry(
        (r.device, r.seq, r.partition, r.kafka_ts, r.ts, r.received_at) for r in ordered
    )
    accountant.add_dlq(r.error for r in dlq)
    return accountant.report(max_problem_devices)
