"""REFERENCE ONLY: the verifier's accounting as it was before issue 19, kept for the
equivalence tests (tests/device_sim/test_accounting_equivalence.py). It holds every record in
memory (``by_device``) and sorts exact latencies; the package uses device_sim.accounting.

The verifier's accounting: what a run sent (its manifest) against what Kafka holds (pure).

Input: the expectations taken from the manifest and the records read back, already parsed into
:class:`TelemetryRecord` / :class:`DlqRecord`. Output: a :class:`Report` with loss, duplicates,
order, partitions, DLQ counts and latency. No I/O here; :mod:`device_sim.verifier` does the reading.

Definitions (per device, records in log order = sorted by partition then offset):

- *missing*: a seq in ``1..sent`` never seen. It is *acknowledged* when the device sent it with
  QoS 1 and Mosquitto acknowledged it (the manifest lists the unacknowledged seqs). QoS 0 sends
  are never acknowledged.
- *duplicate*: a record whose seq was already seen (at-least-once redelivery).
- *order violation*: a record with a new seq lower than the highest seq seen before it.
- *unexpected*: a record whose seq is outside ``1..sent`` or whose device is not in the manifest.
- *latency*: Kafka record timestamp minus the device ``ts`` corrected by the device's known clock
  skew; injected late / out-of-order messages are left out (their ``ts`` is deliberately wrong).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from device_sim.accounting import (
    DeviceProblems,
    DlqRecord,
    Expectations,
    Latency,
    Report,
    TelemetryRecord,
)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``q`` in 0..100)."""
    if not sorted_values:
        raise ValueError("percentile of nothing")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def latency_of(values: Iterable[float]) -> Latency:
    ordered = sorted(values)
    if not ordered:
        return Latency()
    return Latency(
        count=len(ordered),
        p50_ms=percentile(ordered, 50),
        p95_ms=percentile(ordered, 95),
        p99_ms=percentile(ordered, 99),
        max_ms=float(ordered[-1]),
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


def account(
    expected: Expectations,
    telemetry: Iterable[TelemetryRecord],
    dlq: Iterable[DlqRecord] = (),
    max_problem_devices: int = 50,
) -> Report:
    """Compare what was sent with what was read back."""
    report = Report(devices_expected=len(expected.devices))
    by_device: dict[str, list[TelemetryRecord]] = defaultdict(list)
    for rec in telemetry:
        by_device[rec.device].append(rec)
    report.received = sum(len(v) for v in by_device.values())
    report.devices_seen = len(by_device)
    report.sent = sum(d.sent for d in expected.devices.values())

    latencies: list[float] = []
    bridge_latencies: list[float] = []
    partition_counts: Counter[int] = Counter()
    all_problems: list[DeviceProblems] = []
    kafka_ts_all: list[int] = []

    for device in sorted(set(expected.devices) | set(by_device)):
        exp = expected.devices.get(device)
        records = sorted(by_device.get(device, []), key=lambda r: (r.partition, r.offset))
        problems = DeviceProblems(device=device)
        partitions = sorted({r.partition for r in records})
        problems.partitions = partitions
        if records:
            partition_counts[len(partitions)] += 1
        if len(partitions) > 1:
            report.devices_spanning_partitions.append(device)
        if exp is None:
            report.unexpected += len(records)
            continue
        seen: set[int] = set()
        highest = 0
        for rec in records:
            if not 1 <= rec.seq <= exp.sent:
                report.unexpected += 1
                continue
            kafka_ts_all.append(rec.kafka_ts)
            if rec.seq in seen:
                problems.duplicates += 1
                continue
            if rec.seq < highest:
                problems.order_violations += 1
            highest = max(highest, rec.seq)
            seen.add(rec.seq)
            if rec.ts is not None and rec.seq not in exp.skip_latency:
                true_ts = rec.ts - exp.skew_ms
                latencies.append(float(rec.kafka_ts - true_ts))
                if rec.received_at is not None:
                    bridge_latencies.append(float(rec.received_at - true_ts))
        missing = [s for s in range(1, exp.sent + 1) if s not in seen]
        acked_missing = 0 if exp.qos == 0 else sum(1 for s in missing if s not in exp.unacked)
        problems.missing = ranges(missing)
        problems.missing_acked = acked_missing
        report.unique += len(seen)
        report.missing += len(missing)
        report.missing_acked += acked_missing
        report.duplicates += problems.duplicates
        report.order_violations += problems.order_violations
        if missing or problems.duplicates or problems.order_violations or len(partitions) > 1:
            all_problems.append(problems)

    report.missing_unacked = report.missing - report.missing_acked
    report.partitions_per_device = {str(k): v for k, v in sorted(partition_counts.items())}
    report.latency = latency_of(latencies)
    report.bridge_latency = latency_of(bridge_latencies)
    all_problems.sort(key=lambda p: (-p.missing_acked, -len(p.missing), p.device))
    report.problems = all_problems[:max_problem_devices]

    # DLQ
    received_codes: Counter[str] = Counter(r.error for r in dlq)
    report.dlq_expected = dict(sorted(expected.dlq.items()))
    report.dlq_received = dict(sorted(received_codes.items()))
    for code in sorted(set(expected.dlq) | set(received_codes)):
        diff = received_codes.get(code, 0) - expected.dlq.get(code, 0)
        if diff < 0:
            report.dlq_missing[code] = -diff
        elif diff > 0:
            report.dlq_extra[code] = diff

    # throughput
    if expected.started_at_ms is not None and expected.ended_at_ms is not None:
        span = (expected.ended_at_ms - expected.started_at_ms) / 1000.0
        if span > 0:
            report.throughput_sent_per_s = round(report.sent / span, 1)
    if len(kafka_ts_all) > 1:
        span = (max(kafka_ts_all) - min(kafka_ts_all)) / 1000.0
        if span > 0:
            report.throughput_received_per_s = round(len(kafka_ts_all) / span, 1)

    # verdict
    if report.missing_acked:
        report.failures.append(f"{report.missing_acked} acknowledged telemetry messages missing")
    if report.devices_spanning_partitions:
        report.failures.append(
            f"{len(report.devices_spanning_partitions)} devices span more than one partition"
        )
    if report.dlq_missing:
        report.failures.append(f"DLQ records missing by error code: {report.dlq_missing}")
    return report


def reference_verify(
    manifest: Mapping[str, Any],
    *,
    bootstrap: str,
    topic_telemetry: str,
    topic_dlq: str,
    wait_s: float = 15.0,
    from_beginning: bool = False,
) -> Report:
    """The old ``verify()``: every record of the run in lists, then :func:`account`."""
    from device_sim import manifest as manifest_io
    from device_sim.kafka_io import read_records
    from device_sim.verifier import parse_dlq, parse_telemetry

    run_id = str(manifest["run_id"])
    expected = manifest_io.expectations(manifest)
    tele_start = None if from_beginning else manifest_io.start_offsets(manifest, "telemetry")
    dlq_start = None if from_beginning else manifest_io.start_offsets(manifest, "dlq")
    needle = run_id.encode()
    telemetry_raw = read_records(
        bootstrap, topic_telemetry, tele_start, want=lambda r: needle in r.value, wait_s=wait_s
    )
    dlq_raw = read_records(
        bootstrap, topic_dlq, dlq_start, want=lambda r: needle in r.value, wait_s=wait_s
    )
    telemetry = [t for t in (parse_telemetry(r, run_id) for r in telemetry_raw) if t is not None]
    dlq = [d for d in (parse_dlq(r, run_id) for r in dlq_raw) if d is not None]
    return account(expected, telemetry, dlq)
