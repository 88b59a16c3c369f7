"""``iot-sim verify``: read a run's records back from Kafka and account for them.

Telemetry records belong to the run when their payload's ``tags.run`` is the run id; DLQ
records when their (untouched) payload bytes contain the run id. Reading starts at the offsets
the run recorded at its start (else at the beginning of the topic) and goes to the topic's end;
while acknowledged messages are still missing it keeps reading for up to ``wait_s`` seconds
(the bridge may still be draining).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from device_sim import manifest as manifest_io
from device_sim.accounting import (
    DlqRecord,
    Expectations,
    Report,
    TelemetryRecord,
    account,
)
from device_sim.kafka_io import RawRecord, read_records

log = logging.getLogger(__name__)


def _int_header(headers: Mapping[str, bytes], name: str) -> int | None:
    raw = headers.get(name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def parse_telemetry(rec: RawRecord, run_id: str) -> TelemetryRecord | None:
    """The telemetry record of ``run_id`` in ``rec``, or None if it is another run's (or junk)."""
    if run_id.encode() not in rec.value:
        return None
    try:
        doc = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    tags = doc.get("tags")
    if not isinstance(tags, dict) or tags.get("run") != run_id:
        return None
    seq = doc.get("seq")
    if not isinstance(seq, int):
        return None
    device = rec.key.decode("utf-8", errors="replace") if rec.key else str(doc.get("device_id"))
    ts = doc.get("ts")
    return TelemetryRecord(
        device=device,
        seq=seq,
        partition=rec.partition,
        offset=rec.offset,
        kafka_ts=rec.timestamp,
        ts=ts if isinstance(ts, int) else None,
        received_at=_int_header(rec.headers, "received_at"),
    )


def parse_dlq(rec: RawRecord, run_id: str) -> DlqRecord | None:
    """The DLQ record of ``run_id`` in ``rec`` (its payload bytes contain the run id), or None."""
    if run_id.encode() not in rec.value:
        return None
    error = rec.headers.get("error", b"").decode("utf-8", errors="replace") or "(no error header)"
    device = rec.key.decode("utf-8", errors="replace") if rec.key else None
    return DlqRecord(device=device, error=error, partition=rec.partition, offset=rec.offset)


class _AckedMissing:
    """``keep_going`` for the telemetry read: True while an acknowledged seq is still absent.

    Parses only the records added since the last call."""

    def __init__(self, expected: Expectations, run_id: str) -> None:
        self._expected = expected
        self._run_id = run_id
        self._done = 0
        self._seen: dict[str, set[int]] = {}

    def __call__(self, records: list[RawRecord]) -> bool:
        for raw in records[self._done :]:
            rec = parse_telemetry(raw, self._run_id)
            if rec is not None:
                self._seen.setdefault(rec.device, set()).add(rec.seq)
        self._done = len(records)
        for device, exp in self._expected.devices.items():
            if exp.qos == 0:
                continue
            got = self._seen.get(device, set())
            for seq in range(1, exp.sent + 1):
                if seq not in got and seq not in exp.unacked:
                    return True
        return False


def verify(
    manifest: Mapping[str, Any],
    *,
    bootstrap: str,
    topic_telemetry: str,
    topic_dlq: str,
    wait_s: float = 15.0,
    from_beginning: bool = False,
) -> Report:
    """Read the run's telemetry and DLQ records and return the accounting report."""
    run_id = str(manifest["run_id"])
    expected = manifest_io.expectations(manifest)
    tele_start = None if from_beginning else manifest_io.start_offsets(manifest, "telemetry")
    dlq_start = None if from_beginning else manifest_io.start_offsets(manifest, "dlq")
    needle = run_id.encode()

    telemetry_raw = read_records(
        bootstrap,
        topic_telemetry,
        tele_start,
        want=lambda r: needle in r.value,
        keep_going=_AckedMissing(expected, run_id),
        wait_s=wait_s,
    )
    expected_dlq_total = sum(expected.dlq.values())
    dlq_raw = read_records(
        bootstrap,
        topic_dlq,
        dlq_start,
        want=lambda r: needle in r.value,
        keep_going=lambda kept: len(kept) < expected_dlq_total,
        wait_s=wait_s,
    )
    telemetry = [t for t in (parse_telemetry(r, run_id) for r in telemetry_raw) if t is not None]
    dlq = [d for d in (parse_dlq(r, run_id) for r in dlq_raw) if d is not None]
    log.info("run %s: %d telemetry and %d DLQ records read", run_id, len(telemetry), len(dlq))
    return account(expected, telemetry, dlq)


def summary(report: Report, manifest: Mapping[str, Any]) -> str:
    """A human summary of the report."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f} ms"

    lines = [
        f"run {manifest.get('run_id')}  ({manifest.get('status')})",
        f"  devices        {report.devices_seen} seen / {report.devices_expected} in manifest",
        f"  sent           {report.sent:,} telemetry messages",
        f"  received       {report.received:,} records ({report.unique:,} unique)",
        f"  missing        {report.missing:,} (acknowledged: {report.missing_acked:,}, "
        f"never acknowledged: {report.missing_unacked:,})",
        f"  duplicates     {report.duplicates:,}",
        f"  order          {report.order_violations:,} per-device order violations",
        f"  unexpected     {report.unexpected:,}",
        f"  partitions     per device: {report.partitions_per_device or '{}'}; "
        f"{len(report.devices_spanning_partitions)} devices span more than one",
        f"  DLQ            expected {report.dlq_expected or '{}'}",
        f"                 received {report.dlq_received or '{}'}",
    ]
    lat, blat = report.latency, report.bridge_latency
    lines.append(
        f"  latency        device ts -> Kafka: p50 {ms(lat.p50_ms)}  p95 {ms(lat.p95_ms)}  "
        f"p99 {ms(lat.p99_ms)}  max {ms(lat.max_ms)}  (n={lat.count:,})"
    )
    if blat.count:
        lines.append(
            f"                 device ts -> bridge received_at: p50 {ms(blat.p50_ms)}  "
            f"p95 {ms(blat.p95_ms)}  p99 {ms(blat.p99_ms)}"
        )
    sent_rate = report.throughput_sent_per_s
    recv_rate = report.throughput_received_per_s
    lines.append(
        f"  throughput     sent {'-' if sent_rate is None else f'{sent_rate:,.1f}'} msg/s, "
        f"into Kafka {'-' if recv_rate is None else f'{recv_rate:,.1f}'} msg/s"
    )
    for problem in report.problems[:10]:
        missing = ",".join(problem.missing[:8]) + (" ..." if len(problem.missing) > 8 else "")
        lines.append(
            f"  ! {problem.device}: missing [{missing}] dup {problem.duplicates} "
            f"order {problem.order_violations} partitions {problem.partitions}"
        )
    lines.append(
        "  RESULT         " + ("OK" if report.ok else "FAIL: " + "; ".join(report.failures))
    )
    return "\n".join(lines)
