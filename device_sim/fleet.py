"""A whole simulation run: :func:`run_fleet` is the entry point.

It records the Kafka end offsets (so the verifier knows where the run starts), writes a
``running`` manifest, runs the devices (in this process, or in ``options.processes`` worker
processes), then writes the final manifest with the devices' records and the totals.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from device_sim import manifest as manifest_io
from device_sim.counters import Stats
from device_sim.errors import SimError
from device_sim.manifest_builder import build_manifest, new_run_id
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec
from device_sim.worker import StatsSink, WorkerPlan, cpu_seconds, run_worker
from device_sim.worker_pool import run_processes

log = logging.getLogger(__name__)

OFFSETS_TIMEOUT_S = 5.0


def run_fleet(
    spec: FleetSpec,
    endpoints: Endpoints,
    options: RunOptions,
    *,
    runs_dir: Path,
    run_id: str | None = None,
    on_stats: StatsSink | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run a whole simulation; returns the manifest path and document."""
    run_id = run_id or new_run_id()
    path = manifest_io.run_dir(runs_dir, run_id) / manifest_io.MANIFEST_NAME
    offsets = _record_offsets(endpoints, spec.event_rate > 0) if options.record_offsets else None
    manifest = functools.partial(
        build_manifest,
        spec,
        run_id,
        endpoints=endpoints,
        options=options,
        started_at_ms=int(time.time() * 1000),
        start_offsets=offsets,
    )
    manifest_io.write(path, manifest())
    log.info("run %s: %d devices, manifest %s", run_id, spec.devices, path)
    cpu_before = cpu_seconds()
    if options.processes <= 1:
        records, stats, interrupted = _run_inline(spec, run_id, endpoints, options, on_stats)
        cpu = cpu_seconds() - cpu_before
    else:
        records, stats, cpu, interrupted = run_processes(spec, run_id, endpoints, options, on_stats)
        cpu += cpu_seconds() - cpu_before
    doc = manifest(
        records=records,
        stats=stats,
        status="interrupted" if interrupted else "complete",
        ended_at_ms=int(time.time() * 1000),
        cpu_seconds=cpu,
    )
    manifest_io.write(path, doc)
    return path, doc


def _run_inline(
    spec: FleetSpec,
    run_id: str,
    endpoints: Endpoints,
    options: RunOptions,
    on_stats: StatsSink | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], bool]:
    stats = Stats()
    plan = WorkerPlan(spec, run_id, list(range(spec.devices)), endpoints, options)
    records, interrupted = run_worker(plan, stats=stats, on_stats=on_stats)
    return [asdict(r) for r in records], stats.snapshot(), interrupted


def _record_offsets(endpoints: Endpoints, events: bool) -> dict[str, dict[str, int]] | None:
    from device_sim.kafka_io import end_offsets

    try:
        offsets = end_offsets(
            endpoints.kafka_bootstrap,
            [endpoints.topic_telemetry, endpoints.topic_dlq],
            timeout=OFFSETS_TIMEOUT_S,
        )
    except SimError as exc:
        log.warning(
            "could not record Kafka start offsets (%s); verify will scan from the start", exc
        )
        return None
    out = {
        "telemetry": {str(p): o for p, o in offsets[endpoints.topic_telemetry].items()},
        "dlq": {str(p): o for p, o in offsets[endpoints.topic_dlq].items()},
    }
    if events:  # apart, so a missing events topic costs only the events' offsets
        try:
            found = end_offsets(
                endpoints.kafka_bootstrap, [endpoints.topic_events], timeout=OFFSETS_TIMEOUT_S
            )
        except SimError as exc:
            log.warning("could not record the events topic's start offsets (%s)", exc)
        else:
            out["events"] = {str(p): o for p, o in found[endpoints.topic_events].items()}
    return out
