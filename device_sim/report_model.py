"""What the verifier's accounting takes and gives (pure): the records read back from Kafka, the
expectations taken from the manifest, the report with its latency and per-device problems, and
the verdict that turns a report into failures. The accounting itself is
:mod:`device_sim.accounting`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from device_sim.latency_histogram import LatencyHistogram


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


def verdict(report: Report, max_unacked_fraction: float | None = None) -> None:
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
