"""The events' part of the verdict (pure): a second :class:`~device_sim.accounting.Accountant`
counts the run's events (per device: own seqs ``1..events_sent``, QoS 1), and its report is
folded into the telemetry report under ``events``. The telemetry figures stay as they were;
events add failures of their own (acknowledged events missing, a device's events spanning
partitions), prefixed ``events:``."""

from __future__ import annotations

from typing import Any

from device_sim.accounting import Report

_FIELDS = (
    "sent",
    "received",
    "unique",
    "missing",
    "missing_acked",
    "missing_unacked",
    "duplicates",
    "order_violations",
    "unexpected",
    "devices_seen",
)


def events_summary(events: Report) -> dict[str, Any]:
    """What the report keeps of the events' accounting."""
    out: dict[str, Any] = {name: getattr(events, name) for name in _FIELDS}
    out["devices_spanning_partitions"] = list(events.devices_spanning_partitions)
    out["partitions_per_device"] = dict(events.partitions_per_device)
    out["latency"] = {
        "count": events.latency.count,
        "p50_ms": events.latency.p50_ms,
        "p99_ms": events.latency.p99_ms,
        "max_ms": events.latency.max_ms,
    }
    out["problems"] = [
        {"device": p.device, "missing": p.missing[:20], "duplicates": p.duplicates}
        for p in events.problems[:10]
    ]
    return out


def fold_events(report: Report, events: Report) -> None:
    """Attach the events' figures to ``report`` and add their failures (the verdict)."""
    report.events = events_summary(events)
    if events.missing_acked:
        report.failures.append(f"events: {events.missing_acked} acknowledged events missing")
    if events.devices_spanning_partitions:
        report.failures.append(
            f"events: {len(events.devices_spanning_partitions)} devices span more than one "
            "partition"
        )
