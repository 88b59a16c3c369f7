"""``iot-sim verify``: read a run's records back from Kafka and account for them as they come.

Telemetry records belong to the run when their payload's ``tags.run`` is the run id; DLQ
records when their (untouched) payload bytes contain the run id. Reading starts at the offsets
the run recorded at its start (else at the beginning of the topic) and goes to the topic's end;
while acknowledged messages are still missing it keeps reading for up to ``wait_s`` seconds
(the bridge may still be draining).

Each Kafka batch is reduced to rows of six numbers and strings, counted by an
:class:`~device_sim.accounting.Accountant` and dropped: memory stays O(devices) however long
the run, and no per-record object outlives its batch.
"""

from __future__ import annotations

import functools
import gc
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ParamSpec, TypeVar

import msgspec
import orjson
from confluent_kafka import Message

from device_sim import manifest as manifest_io
from device_sim.accounting import Accountant, DlqRecord, Report, Row, TelemetryRecord
from device_sim.event_accounting import fold_events
from device_sim.event_rows import EventRows
from device_sim.kafka_io import RawRecord, partitions_of, scan

log = logging.getLogger(__name__)

NO_ERROR_HEADER = "(no error header)"
Progress = Callable[[Accountant, float], None]  # (accountant, seconds since start)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _without_gc(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with the cyclic garbage collector paused. Reading makes no reference cycles
    (refcounting frees each batch), but a batch's 10,000 messages, header lists and rows set
    off collections that scan every live object: half the cost of ``Message.headers()``."""

    @functools.wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return paused


def _int_header(value: bytes | str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def payload_fields(value: bytes, run_id: str) -> tuple[int, int | None, Any] | None:
    """``(seq, ts, device_id)`` of a telemetry payload of ``run_id``, else None.

    The caller has checked that the run id's bytes occur in ``value`` (a cheap filter)."""
    try:
        doc = orjson.loads(value)
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
    ts = doc.get("ts")
    return seq, ts if isinstance(ts, int) else None, doc.get("device_id")


class _Tags(msgspec.Struct):
    run: Any = None


class _Telemetry(msgspec.Struct):
    """Only the fields the verifier reads: msgspec skips the rest (metrics, the padding)
    without building Python objects for them, about twice as fast as a full parse of 1 kB."""

    ts: Any = None
    seq: Any = None
    device_id: Any = None
    tags: _Tags | None = None


_decode_telemetry = msgspec.json.Decoder(_Telemetry).decode


def fast_payload_fields(value: bytes, run_id: str) -> tuple[int, int | None, Any] | None:
    """:func:`payload_fields`, faster. Falls back to it whenever the two could disagree: a
    non-ASCII payload (orjson checks UTF-8 in fields msgspec skips), or one that does not fit
    the shape (``tags`` not an object, not an object at all, not JSON)."""
    if not value.isascii():
        return payload_fields(value, run_id)
    try:
        doc = _decode_telemetry(value)
    except msgspec.MsgspecError:
        return payload_fields(value, run_id)
    tags = doc.tags
    if tags is None or tags.run != run_id:
        return None
    seq = doc.seq
    if not isinstance(seq, int):
        return None
    ts = doc.ts
    return seq, ts if isinstance(ts, int) else None, doc.device_id


def parse_telemetry(rec: RawRecord, run_id: str) -> TelemetryRecord | None:
    """The telemetry record of ``run_id`` in ``rec``, or None if it is another run's (or junk)."""
    if run_id.encode() not in rec.value:
        return None
    fields = payload_fields(rec.value, run_id)
    if fields is None:
        return None
    seq, ts, device_id = fields
    device = rec.key.decode("utf-8", errors="replace") if rec.key else str(device_id)
    return TelemetryRecord(
        device=device,
        seq=seq,
        partition=rec.partition,
        offset=rec.offset,
        kafka_ts=rec.timestamp,
        ts=ts,
        received_at=_int_header(rec.headers.get("received_at")),
    )


def parse_dlq(rec: RawRecord, run_id: str) -> DlqRecord | None:
    """The DLQ record of ``run_id`` in ``rec`` (its payload bytes contain the run id), or None."""
    if run_id.encode() not in rec.value:
        return None
    error = rec.headers.get("error", b"").decode("utf-8", errors="replace") or NO_ERROR_HEADER
    device = rec.key.decode("utf-8", errors="replace") if rec.key else None
    return DlqRecord(device=device, error=error, partition=rec.partition, offset=rec.offset)


def _header(headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None, name: str) -> Any:
    """The last value of header ``name`` (as a dict of the headers would hold it), or None."""
    if isinstance(headers, Mapping):
        return headers.get(name)
    found = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


class TelemetryRows:
    """Kafka messages -> accountant rows for one run (what :func:`parse_telemetry` does,
    without building a record object per message). Device names are decoded once per key."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.needle = run_id.encode()
        self._names: dict[bytes, str] = {}

    def __call__(self, batch: list[Message]) -> list[Row]:
        # The per-record cost is the verifier's speed (issue 19: 200,000 records/s on 2 cores),
        # so fast_payload_fields and the header look-up are inlined here (a function call and
        # an isinstance(Mapping) check cost as much as the decode of 512 bytes).
        rows: list[Row] = []
        append = rows.append
        needle, run_id, names = self.needle, self.run_id, self._names
        decode, decode_error = _decode_telemetry, msgspec.MsgspecError
        for msg in batch:
            value = msg.value()
            if value is None or needle not in value:
                continue
            if value.isascii():
                try:
                    doc = decode(value)
                except decode_error:
                    fields = payload_fields(value, run_id)
                    if fields is None:
                        continue
                    seq, ts, device_id = fields
                else:
                    tags = doc.tags
                    if tags is None or tags.run != run_id:
                        continue
                    seq = doc.seq
                    if not isinstance(seq, int):
                        continue
                    ts = doc.ts
                    if not isinstance(ts, int):
                        ts = None
                    device_id = doc.device_id
            else:
                fields = payload_fields(value, run_id)
                if fields is None:
                    continue
                seq, ts, device_id = fields
            key = msg.key()
            if key:
                device = names.get(key)
                if device is None:
                    device = names[key] = key.decode("utf-8", errors="replace")
            else:
                device = str(device_id)
            received = None
            headers: Any = msg.headers()  # a list of (name, value) as fetched
            for name, data in headers or ():
                if name == "received_at":
                    received = data  # the last one, as a dict of the headers would hold
            received_at = _int_header(received) if received else None
            partition: Any = msg.partition()  # a fetched record has one
            append((device, seq, partition, msg.timestamp()[1], ts, received_at))
        return rows


def dlq_errors(batch: list[Message], run_id: str) -> list[str]:
    """The error codes of the run's DLQ records in ``batch`` (as :func:`parse_dlq`)."""
    needle = run_id.encode()
    out: list[str] = []
    for msg in batch:
        value = msg.value()
        if value is None or needle not in value:
            continue
        raw = _header(msg.headers(), "error")
        data = raw.encode() if isinstance(raw, str) else raw or b""
        out.append(data.decode("utf-8", errors="replace") or NO_ERROR_HEADER)
    return out


def log_progress(accountant: Accountant, elapsed_s: float) -> None:
    rate = accountant.received / elapsed_s if elapsed_s > 0 else 0.0
    log.info(
        "%d telemetry records of the run counted in %.1f s (%.0f/s), %d acknowledged missing",
        accountant.received,
        elapsed_s,
        rate,
        accountant.missing_acked(),
    )


@_without_gc
def verify(
    manifest: Mapping[str, Any],
    *,
    bootstrap: str,
    topic_telemetry: str,
    topic_dlq: str,
    wait_s: float = 15.0,
    from_beginning: bool = False,
    on_progress: Progress | None = log_progress,
    progress_every_s: float = 10.0,
    topic_events: str = "iot.events",
    timeline_s: float | None = None,
    max_unacked_fraction: float | None = manifest_io.DEFAULT_MAX_UNACKED_FRACTION,
    workers: int = 1,
) -> Report:
    """Read the run's telemetry and DLQ records, counting them as they come; the final report.

    ``on_progress(accountant, elapsed_s)`` is called about every ``progress_every_s`` seconds
    while reading (``accountant.report()`` gives the running figures). When the run sent
    events, ``topic_events`` is read too, into an accountant of its own (see
    :mod:`device_sim.event_accounting`). With ``timeline_s`` the report also holds the
    telemetry latency percentiles per window of that many seconds (``latency_timeline``).
    More than ``max_unacked_fraction`` of the telemetry never acknowledged and missing makes
    the run inconclusive (a failure; None: no limit). With ``workers`` > 1 the telemetry
    partitions are shared out between that many processes, each counting its share to the
    topic's end with an accountant of its own; their accountants are merged (a device's
    records are all in one partition, so the merge is exact for every passing run) and the
    wait for late records goes on in this process from where they stopped."""
    run_id = str(manifest["run_id"])
    timeline_ms = None if timeline_s is None else max(1, round(timeline_s * 1000))
    accountant = Accountant(manifest_io.expectations(manifest, max_unacked_fraction), timeline_ms)
    tele_start = None if from_beginning else manifest_io.start_offsets(manifest, "telemetry")
    dlq_start = None if from_beginning else manifest_io.start_offsets(manifest, "dlq")
    started = time.monotonic()
    next_progress = started + progress_every_s

    if workers > 1:
        tele_start = _count_in_workers(
            accountant,
            manifest,
            workers,
            (bootstrap, topic_telemetry, tele_start, max_unacked_fraction, timeline_ms),
        )
    rows = TelemetryRows(run_id)
    for batch in scan(
        bootstrap,
        topic_telemetry,
        tele_start,
        keep_going=lambda: accountant.missing_acked() > 0,
        wait_s=wait_s,
    ):
        accountant.add_telemetry(rows(batch))
        if on_progress is not None and time.monotonic() >= next_progress:
            on_progress(accountant, time.monotonic() - started)
            next_progress = time.monotonic() + progress_every_s
    expected_dlq_total = sum(accountant.expected.dlq.values())
    for batch in scan(
        bootstrap,
        topic_dlq,
        dlq_start,
        keep_going=lambda: accountant.dlq_total < expected_dlq_total,
        wait_s=wait_s,
    ):
        accountant.add_dlq(dlq_errors(batch, run_id))
    elapsed = time.monotonic() - started
    log.info(
        "run %s: %d telemetry and %d DLQ records counted in %.1f s",
        run_id,
        accountant.received,
        accountant.dlq_total,
        elapsed,
    )
    report = accountant.report()
    event_exp = manifest_io.event_expectations(manifest)
    if event_exp is not None:
        events = Accountant(event_exp)
        event_rows = EventRows(run_id)
        for batch in scan(
            bootstrap,
            topic_events,
            None if from_beginning else manifest_io.start_offsets(manifest, "events"),
            keep_going=lambda: events.missing_acked() > 0,
            wait_s=wait_s,
        ):
            events.add_telemetry(event_rows(batch))
        log.info("run %s: %d event records counted", run_id, events.received)
        fold_events(report, events.report())
    return report


def _unacked_warning(report: Report) -> list[str]:
    """A loud line when messages were lost without an acknowledgement: they do not fail a run
    by themselves, but many of them mean the load was not delivered (see accounting._verdict)."""
    if not report.missing_unacked or not report.sent:
        return []
    share = report.missing_unacked / report.sent
    limit = report.max_unacked_fraction
    verdict = (
        "the run is INCONCLUSIVE"
        if report.inconclusive
        else "within the limit"
        if limit is not None
        else "no limit set"
    )
    bound = "" if limit is None else f" (limit {limit:.2%})"
    return [
        f"  !! NEVER ACKNOWLEDGED  {report.missing_unacked:,} of {report.sent:,} sent "
        f"({share:.2%}){bound}: {verdict}"
    ]


# what a worker needs besides the manifest and its partitions:
# (bootstrap, topic, start offsets or None, max_unacked_fraction, timeline_ms)
_Share = tuple[str, str, dict[int, int] | None, float | None, int | None]


@_without_gc
def _count_share(
    manifest: Mapping[str, Any], partitions: list[int], share: _Share
) -> tuple[Accountant, dict[int, int]]:
    """One worker process: count ``partitions`` of the topic to its current end; returns the
    accountant and the offset where each partition's reading stopped."""
    bootstrap, topic, start, max_unacked_fraction, timeline_ms = share
    accountant = Accountant(manifest_io.expectations(manifest, max_unacked_fraction), timeline_ms)
    rows = TelemetryRows(str(manifest["run_id"]))
    positions: dict[int, int] = {}
    for batch in scan(bootstrap, topic, start, partitions=partitions, positions=positions):
        accountant.add_telemetry(rows(batch))
    return accountant, positions


def _count_in_workers(
    accountant: Accountant, manifest: Mapping[str, Any], workers: int, share: _Share
) -> dict[int, int]:
    """Count the topic's partitions in ``workers`` processes (spawned: no librdkafka state is
    forked), merge their accounts into ``accountant``; returns where they stopped."""
    bootstrap, topic, start = share[0], share[1], share[2]
    parts = partitions_of(bootstrap, topic)
    groups = [g for g in (parts[i::workers] for i in range(workers)) if g]
    positions: dict[int, int] = dict(start or {})
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(groups), mp_context=context) as pool:
        futures = [pool.submit(_count_share, dict(manifest), g, share) for g in groups]
        for future in futures:
            counted, stopped = future.result()
            accountant.merge(counted)
            positions.update(stopped)
    log.info("%d workers counted %d records", len(groups), accountant.received)
    return positions


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
        *_unacked_warning(report),
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
    if report.events is not None:
        ev = report.events
        lines.append(
            f"  events         sent {ev['sent']:,}, received {ev['received']:,} "
            f"({ev['unique']:,} unique), missing {ev['missing']:,} "
            f"(acknowledged: {ev['missing_acked']:,}), duplicates {ev['duplicates']:,}, "
            f"order {ev['order_violations']:,}"
        )
    lines.append(
        "  RESULT         " + ("OK" if report.ok else "FAIL: " + "; ".join(report.failures))
    )
    return "\n".join(lines)
