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
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ParamSpec, TypeVar

from device_sim import manifest as manifest_io
from device_sim.accounting import Accountant, Report
from device_sim.event_accounting import fold_events
from device_sim.event_rows import EventRows
from device_sim.kafka_io import partitions_of, scan
from device_sim.telemetry_rows import (  # the record parsers, also imported from here
    TelemetryRows,
    dlq_errors,
    fast_payload_fields,
    parse_dlq,
    parse_telemetry,
    payload_fields,
)

log = logging.getLogger(__name__)

__all__ = [
    "Progress",
    "TelemetryRows",
    "dlq_errors",
    "fast_payload_fields",
    "log_progress",
    "parse_dlq",
    "parse_telemetry",
    "payload_fields",
    "summary",
    "verify",
]

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
    by themselves, but many of them mean the load was not delivered (see report_model.verdict)."""
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
