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

from collections import Counter
from collections.abc import Iterable

from device_sim import seq_bitmap
from device_sim.latency_histogram import LatencyHistogram
from device_sim.latency_timeline import LatencyTimeline
from device_sim.report_model import (
    DeviceExpectation,
    DeviceProblems,
    DlqRecord,
    Expectations,
    Latency,
    Report,
    Row,
    TelemetryRecord,
    latency_of,
    percentile,
    ranges,
    verdict,
)

# the report's types, re-exported: callers import them from here
__all__ = [
    "Accountant",
    "DeviceExpectation",
    "DeviceProblems",
    "DlqRecord",
    "Expectations",
    "Latency",
    "Report",
    "Row",
    "TelemetryRecord",
    "account",
    "latency_of",
    "percentile",
    "ranges",
]


_NO_FIRST = 1 << 63  # above any int64 Kafka timestamp: "no record yet"
_NO_LAST = -(1 << 63) - 1


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
        "unexpected",
    )

    def __init__(self, exp: DeviceExpectation | None, partition: int) -> None:
        self.exp = exp
        self.sent = exp.sent if exp is not None else 0  # 0: every seq is unexpected
        self.skew = exp.skew_ms if exp is not None else 0
        self.skip = exp.skip_latency if exp is not None else frozenset()
        self.seen = seq_bitmap.new_bitmap(self.sent) if self.sent > 0 else bytearray()
        self.highest = 0
        self.records = 0  # every record of the device, in range or not
        self.unexpected = 0  # of them, those with a seq outside 1..sent
        self.duplicates = 0
        self.order = 0
        self.partition = partition  # the first partition seen
        self.more_partitions: set[int] | None = None  # others, if any (a failure)

    @property
    def unique(self) -> int:
        """Distinct seqs of 1..sent seen: derived, so the hot loop counts one thing less."""
        return self.records - self.unexpected - self.duplicates

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
        latencies: list[int] = []  # counted per batch (LatencyHistogram.update)
        bridge_latencies: list[int] = []
        latency = latencies.append
        bridge_latency = bridge_latencies.append
        timeline = None if self.timeline is None else self.timeline.add
        received = unexpected = 0  # in range: the rest
        # int sentinels instead of None: one comparison per record each (Kafka ts are int64)
        first_ts = _NO_FIRST if self._first_ts is None else self._first_ts
        last_ts = _NO_LAST if self._last_ts is None else self._last_ts
        for device, seq, partition, kafka_ts, ts, received_at in rows:
            received += 1
            try:  # a subscript, not .get(): no method call for the common, known device
                state = devices[device]
            except KeyError:
                state = devices[device] = _Device(self.expected.devices.get(device), partition)
            if partition != state.partition:
                if state.more_partitions is None:
                    state.more_partitions = set()
                state.more_partitions.add(partition)
            state.records += 1
            if not 1 <= seq <= state.sent:
                state.unexpected += 1
                unexpected += 1
                continue
            if kafka_ts < first_ts:  # noqa: PLR1730 (a compare, not a min() call, per record)
                first_ts = kafka_ts
            if kafka_ts > last_ts:  # noqa: PLR1730
                last_ts = kafka_ts
            seen = state.seen
            i = seq >> 3
            bit = 1 << (seq & 7)
            byte = seen[i]
            if byte & bit:
                state.duplicates += 1
                continue
            seen[i] = byte | bit
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
        self._latency.update(latencies)
        self._bridge_latency.update(bridge_latencies)
        self.received += received
        self.unexpected += unexpected
        self._in_range += received - unexpected
        self._first_ts = None if first_ts == _NO_FIRST else first_ts
        self._last_ts = None if last_ts == _NO_LAST else last_ts

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
            mine.unexpected += theirs.unexpected
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
        verdict(report, expected.max_unacked_fraction)
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
