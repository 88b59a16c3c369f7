"""The Overview's numbers (pure): Prometheus text in, rates and a short history out.

Each sample holds every watched service's metrics; two samples make rates. Counters are
read by name without the ``_total`` suffix so both exposition styles match.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Labels = tuple[tuple[str, str], ...]
Metrics = dict[tuple[str, Labels], float]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
HISTORY = 150  # points kept: 5 minutes at the default 2 s


def parse_prometheus(text: str) -> Metrics:
    """Samples of a Prometheus text exposition: {(name, labels): value}."""
    out: Metrics = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        name, _, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        if name.endswith("_total"):
            name = name[: -len("_total")]
        pairs = tuple(sorted(_LABEL.findall(labels or "")))
        out[(name, pairs)] = number
    return out


def total(metrics: Metrics, name: str, **labels: str) -> float:
    """Sum of ``name`` over the samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics.items() if n == name and want <= set(ls))


def by_labels(metrics: Metrics, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    """Sums of ``name`` by the values of ``labels``."""
    out: dict[tuple[str, ...], float] = {}
    for (n, ls), v in metrics.items():
        if n == name:
            found = dict(ls)
            key = tuple(found.get(label, "") for label in labels)
            out[key] = out.get(key, 0.0) + v
    return out


def by_label(metrics: Metrics, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (n, ls), v in metrics.items():
        if n == name:
            key = dict(ls).get(label, "")
            out[key] = out.get(key, 0.0) + v
    return out


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds
    up: Mapping[str, bool]
    metrics: Mapping[str, Metrics]
    command_states: Mapping[str, int] = field(default_factory=dict)  # final states seen so far
    http_in: float = 0.0  # messages published through iot-api (counter)


def _rate(now: float, before: float, seconds: float) -> float:
    if seconds <= 0 or now < before:  # a restarted service starts its counters over
        return 0.0
    return (now - before) / seconds


def is_bridge(service: str) -> bool:
    """``bridge``, or ``bridge-N`` of `iot-stack up --bridges N`."""
    return service == "bridge" or service.startswith("bridge-")


def is_command_path(service: str) -> bool:
    """``commands``, or ``commands-i`` of MQTT shard i (`iot-stack up --mqtt-shards N`)."""
    return service == "commands" or service.startswith("commands-")


def _summed(sample: Sample, counted: Callable[[str], bool] = is_bridge) -> Metrics:
    """The metrics of every instance ``counted`` names added up (bridge instances share the
    MQTT traffic; with shards, each shard has its own bridge and command path)."""
    out: Metrics = {}
    for name, metrics in sample.metrics.items():
        if counted(name):
            for key, value in metrics.items():
                out[key] = out.get(key, 0.0) + value
    return out


def _tenants(b: Metrics, pb: Metrics, dt: float) -> dict[str, dict[str, Any]]:
    """Per tenant: messages/s in at the bridges and dead letters/s by code."""
    got = by_labels(b, "iot_bridge_tenant_received", "tenant")
    old = by_labels(pb, "iot_bridge_tenant_received", "tenant")
    dlq = by_labels(b, "iot_bridge_tenant_dlq", "tenant", "code")
    old_dlq = by_labels(pb, "iot_bridge_tenant_dlq", "tenant", "code")
    out: dict[str, dict[str, Any]] = {}
    for (tenant,), v in sorted(got.items()):
        out[tenant] = {"in": _rate(v, old.get((tenant,), 0.0), dt), "dlq": {}}
    for (tenant, code), v in sorted(dlq.items()):
        entry = out.setdefault(tenant, {"in": 0.0, "dlq": {}})
        entry["dlq"][code] = _rate(v, old_dlq.get((tenant, code), 0.0), dt)
    return out


def point(prev: Sample | None, cur: Sample) -> dict[str, Any]:
    """One history point: rates between two samples, gauges of the current one."""
    b = _summed(cur)
    pb = _summed(prev) if prev is not None else {}
    dt = cur.at - prev.at if prev is not None else 0.0
    received = total(b, "iot_bridge_received")
    produced = total(b, "iot_bridge_produced")
    dlq = by_label(b, "iot_bridge_dlq", "code")
    out: dict[str, Any] = {"at": cur.at, "up": dict(cur.up)}
    if prev is None:
        out |= {"mqtt_in": 0.0, "http_in": 0.0, "kafka_out": 0.0, "dlq": {}, "tenants": None}
    else:
        old_dlq = by_label(pb, "iot_bridge_dlq", "code")
        out |= {
            "mqtt_in": _rate(received, total(pb, "iot_bridge_received"), dt),
            "http_in": _rate(cur.http_in, prev.http_in, dt),
            "kafka_out": _rate(produced, total(pb, "iot_bridge_produced"), dt),
            "dlq": {c: _rate(v, old_dlq.get(c, 0.0), dt) for c, v in sorted(dlq.items())},
            "tenants": _tenants(b, pb, dt),
        }
    acked = total(b, "iot_bridge_acked")
    # the data dirs the bridge watches (store_dirs): {store: free bytes} of the full ones
    free = by_labels(b, "iot_bridge_store_free_bytes", "store")
    out["disk_full"] = {
        store: free.get((store,), 0.0)
        for (store,), v in sorted(by_labels(b, "iot_bridge_store_full", "store").items())
        if v > 0
    }
    out["bridge_pending"] = max(0.0, received - produced - sum(dlq.values())) if b else None
    count = total(b, "iot_bridge_produce_latency_seconds_count")
    lat = total(b, "iot_bridge_produce_latency_seconds_sum")
    if prev is not None:
        count -= total(pb, "iot_bridge_produce_latency_seconds_count")
        lat -= total(pb, "iot_bridge_produce_latency_seconds_sum")
    out["ack_lag_ms"] = round(lat / count * 1000, 1) if count > 0 else None
    out["acked"] = acked
    cmd = _summed(cur, is_command_path)
    out["commands_pending"] = total(cmd, "iot_commands_pending") if cmd else None
    states = cur.command_states
    pstates = prev.command_states if prev is not None else states
    out["commands"] = {
        s: _rate(float(states.get(s, 0)), float(pstates.get(s, 0)), dt)
        for s in ("succeeded", "failed", "expired")
    }
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()
    }


class History:
    """The last points, oldest first."""

    def __init__(self, size: int = HISTORY) -> None:
        self._points: deque[dict[str, Any]] = deque(maxlen=size)
        self._last: Sample | None = None

    def add(self, sample: Sample) -> dict[str, Any]:
        p = point(self._last, sample)
        self._last = sample
        self._points.append(p)
        return p

    def points(self) -> list[dict[str, Any]]:
        return list(self._points)

    def tenant_rates(self, last: int = 5) -> dict[str, dict[str, Any]]:
        """Per tenant, the mean of the last ``last`` points' rates (one pair of samples is
        noisy): {tenant: {"in": msgs/s, "dlq": {code: msgs/s}}}."""
        recent = [p for p in self._points if p.get("tenants") is not None][-last:]
        out: dict[str, dict[str, Any]] = {}
        for p in recent:
            for tenant, r in (p.get("tenants") or {}).items():
                entry = out.setdefault(tenant, {"in": 0.0, "dlq": {}})
                entry["in"] += r["in"] / len(recent)
                for code, v in r["dlq"].items():
                    entry["dlq"][code] = entry["dlq"].get(code, 0.0) + v / len(recent)
        return out
