"""The run manifest: the ground truth of what a run sent and injected (a JSON file).

Layout of ``<runs_dir>/<run_id>/manifest.json`` (see docs/device_sim.md for every field)::

    {"format": "iot-sim-manifest/1", "run_id": ...,
     "status": "running" | "complete" | "interrupted",
     "spec": {...FleetSpec...}, "endpoints": {...}, "processes": n,
     "started_at_ms": ..., "ended_at_ms": ...,
     "start_offsets": {"telemetry": {"0": 123, ...}, "dlq": {...}, "events": {...}} | null,
     "devices": {"dev-00000": {"groups": [...], "sent": n, "qos": 1, "unacked": [...],
                              "skew_ms": 0, "silent": false, "connects": 1,
                              "events_sent": n, "events_unacked": [...]}},
     "injections": {"anomalies": [...], "malformed": [...], "late": [...], "out_of_order": [...],
                    "churn": [...], "offline": [...], "clock_skew": [...]},
     "expected_dlq": {"<error code>": n}, "commands": {...}, "totals": {...}}
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from device_sim.accounting import DeviceExpectation, Expectations
from device_sim.errors import ManifestError

FORMAT = "iot-sim-manifest/1"
MANIFEST_NAME = "manifest.json"
REPORT_NAME = "report.json"
INJECTION_KINDS = (
    "anomalies",
    "malformed",
    "late",
    "out_of_order",
    "churn",
    "offline",
    "clock_skew",
)


def run_dir(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / run_id


def write(path: Path, manifest: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, path)


def read(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise ManifestError(f"no manifest at {path}") from exc
    except orjson.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(f"{path} is not an iot-sim manifest ({FORMAT})")
    return data


def latest(runs_dir: Path) -> Path:
    """The manifest of the most recently started run under ``runs_dir``."""
    best: tuple[int, str] | None = None
    best_path: Path | None = None
    if runs_dir.is_dir():
        for candidate in runs_dir.glob(f"*/{MANIFEST_NAME}"):
            try:
                started = int(orjson.loads(candidate.read_bytes()).get("started_at_ms") or 0)
            except (OSError, orjson.JSONDecodeError, AttributeError, ValueError):
                continue
            key = (started, candidate.parent.name)
            if best is None or key > best:
                best, best_path = key, candidate
    if best_path is None:
        raise ManifestError(f"no run manifest under {runs_dir} (run `iot-sim run` first)")
    return best_path


def resolve(runs_dir: Path, ref: str | None) -> Path:
    """A manifest path from ``ref``: None (latest run), a run id, a run dir or a manifest file."""
    if ref is None:
        return latest(runs_dir)
    path = Path(ref)
    if path.is_file():
        return path
    if path.is_dir() and (path / MANIFEST_NAME).is_file():
        return path / MANIFEST_NAME
    candidate = run_dir(runs_dir, ref) / MANIFEST_NAME
    if candidate.is_file():
        return candidate
    raise ManifestError(f"no run {ref!r}: neither a manifest file nor a run id under {runs_dir}")


def empty_injections() -> dict[str, list[dict[str, Any]]]:
    return {k: [] for k in INJECTION_KINDS}


def expected_dlq(malformed: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """DLQ records expected per error code: the malformed sends Mosquitto acknowledged."""
    counts: Counter[str] = Counter(
        str(m["expected_error"]) for m in malformed if m.get("acked", True)
    )
    return dict(sorted(counts.items()))


DEFAULT_MAX_UNACKED_FRACTION = 0.01


def expectations(
    manifest: Mapping[str, Any], max_unacked_fraction: float | None = DEFAULT_MAX_UNACKED_FRACTION
) -> Expectations:
    """What the verifier must find, from a manifest; beyond ``max_unacked_fraction`` of the
    telemetry never acknowledged and missing the run is inconclusive (None: no limit)."""
    skip: dict[str, set[int]] = {}
    injections = manifest.get("injections") or {}
    for kind in ("late", "out_of_order"):
        for item in injections.get(kind, []):
            skip.setdefault(str(item["device"]), set()).add(int(item["seq"]))
    devices: dict[str, DeviceExpectation] = {}
    for device, info in (manifest.get("devices") or {}).items():
        devices[device] = DeviceExpectation(
            sent=int(info.get("sent", 0)),
            qos=int(info.get("qos", 1)),
            unacked=frozenset(int(s) for s in info.get("unacked", [])),
            skew_ms=int(info.get("skew_ms", 0)),
            skip_latency=frozenset(skip.get(device, set())),
        )
    return Expectations(
        devices=devices,
        dlq={str(k): int(v) for k, v in (manifest.get("expected_dlq") or {}).items()},
        started_at_ms=manifest.get("started_at_ms"),
        ended_at_ms=manifest.get("ended_at_ms"),
        max_unacked_fraction=max_unacked_fraction,
    )


def event_expectations(manifest: Mapping[str, Any]) -> Expectations | None:
    """What the verifier must find on the events topic, or None when the run sent no events.

    Events are QoS 1 with their own per-device seqs ``1..events_sent``; their clocks carry the
    device's skew like telemetry's."""
    devices: dict[str, DeviceExpectation] = {}
    total = 0
    for device, info in (manifest.get("devices") or {}).items():
        sent = int(info.get("events_sent", 0))
        total += sent
        devices[device] = DeviceExpectation(
            sent=sent,
            qos=1,
            unacked=frozenset(int(s) for s in info.get("events_unacked", [])),
            skew_ms=int(info.get("skew_ms", 0)),
        )
    if total == 0:
        return None
    return Expectations(
        devices=devices,
        started_at_ms=manifest.get("started_at_ms"),
        ended_at_ms=manifest.get("ended_at_ms"),
    )


def start_offsets(manifest: Mapping[str, Any], which: str) -> dict[int, int] | None:
    """Recorded start offsets of the ``telemetry``, ``events`` or ``dlq`` topic, or None."""
    offsets = (manifest.get("start_offsets") or {}).get(which)
    if not offsets:
        return None
    return {int(p): int(o) for p, o in offsets.items()}
