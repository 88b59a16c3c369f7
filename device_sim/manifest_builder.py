"""The manifest document a run writes (pure): its id, per-device records and totals.

:mod:`device_sim.manifest` reads and writes the files; this module only builds the document
from the spec, the devices' records (as dicts) and the merged counters.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from typing import Any

from device_sim import manifest as manifest_io
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec

_COMMAND_COUNTS = {
    "received": "commands",
    "replied_ok": "replied_ok",
    "replied_error": "replied_error",
    "ignored": "ignored",
}
_DEVICE_FIELDS = ("groups", "sent", "qos", "unacked", "skew_ms", "silent", "connects", "failed")
_EVENT_FIELDS = {"events_sent": 0, "events_unacked": []}  # with their defaults (no events)


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmddTHHMMSS-<6 hex>`` (UTC)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def build_manifest(
    spec: FleetSpec,
    run_id: str,
    *,
    endpoints: Endpoints,
    options: RunOptions,
    started_at_ms: int,
    start_offsets: dict[str, dict[str, int]] | None,
    records: list[dict[str, Any]] | None = None,
    stats: dict[str, Any] | None = None,
    status: str = "running",
    ended_at_ms: int | None = None,
    cpu_seconds: float | None = None,
) -> dict[str, Any]:
    """The manifest document (see :mod:`device_sim.manifest`)."""
    injections = manifest_io.empty_injections()
    devices: dict[str, dict[str, Any]] = {}
    commands = dict.fromkeys(_COMMAND_COUNTS, 0)
    event_types: Counter[str] = Counter()
    for rec in sorted(records or [], key=lambda r: r["device"]):
        event_types.update(rec.get("event_types") or {})
        for kind, items in rec["injections"].items():
            injections[kind].extend(items)
        devices[rec["device"]] = {name: rec[name] for name in _DEVICE_FIELDS}
        devices[rec["device"]].update({k: rec.get(k, v) for k, v in _EVENT_FIELDS.items()})
        for name, source in _COMMAND_COUNTS.items():
            commands[name] += rec[source]
    return {
        "format": manifest_io.FORMAT,
        "run_id": run_id,
        "status": status,
        "spec": spec.to_dict(),
        "endpoints": endpoints.public(),
        "processes": options.processes,
        "started_at_ms": started_at_ms,
        "ended_at_ms": ended_at_ms,
        "start_offsets": start_offsets,
        "devices": devices,
        "injections": injections,
        "expected_dlq": manifest_io.expected_dlq(injections["malformed"]),
        "commands": commands,
        "totals": {} if stats is None else _totals(devices, stats, cpu_seconds, event_types),
    }


def _totals(
    devices: dict[str, dict[str, Any]],
    stats: dict[str, Any],
    cpu_seconds: float | None,
    event_types: Counter[str],
) -> dict[str, Any]:
    first, last = stats.get("first_publish"), stats.get("last_publish")
    span = (last - first) if first is not None and last is not None else 0.0
    published = int(stats.get("published", 0))
    rate = published / span if span > 0 else None
    totals: dict[str, Any] = {
        "published": published,
        "telemetry_sent": sum(d["sent"] for d in devices.values()),
        "malformed_sent": int(stats.get("malformed", 0)),
        "unacked": sum(len(d["unacked"]) for d in devices.values()),
        "events_sent": sum(d["events_sent"] for d in devices.values()),
        "events_unacked": sum(len(d["events_unacked"]) for d in devices.values()),
        "events_by_type": dict(sorted(event_types.items())),
        "publish_errors": int(stats.get("errors", 0)),
        "connect_failures": int(stats.get("connect_failures", 0)),
        "devices_failed": sum(1 for d in devices.values() if d["failed"]),
        "connects": int(stats.get("connects", 0)),
        "publish_span_s": round(span, 3),
        "msgs_per_s": round(rate, 1) if rate else None,
        "cpu_seconds": round(cpu_seconds, 3) if cpu_seconds is not None else None,
    }
    if rate and cpu_seconds is not None and span > 0:
        totals["cpu_cores_per_1000_msgs_per_s"] = round(cpu_seconds / span / (rate / 1000), 4)
    return totals
