"""Manifest files: writing, finding the latest run, and the expectations read from them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from device_sim import manifest
from device_sim.errors import ManifestError


def _doc(run_id: str, started: int) -> dict:
    return {
        "format": manifest.FORMAT,
        "run_id": run_id,
        "started_at_ms": started,
        "ended_at_ms": started + 1000,
        "devices": {
            "a": {"sent": 5, "qos": 1, "unacked": [5], "skew_ms": -300},
            "b": {"sent": 2, "qos": 0, "unacked": []},
        },
        "injections": {
            "late": [{"device": "a", "seq": 2, "shift_ms": 200000}],
            "out_of_order": [{"device": "a", "seq": 3, "shift_ms": 900}],
        },
        "expected_dlq": {"not_json": 2},
        "start_offsets": {"telemetry": {"0": 10, "1": 0}, "dlq": None},
    }


def test_write_read_latest_resolve(tmp_path: Path) -> None:
    for run_id, started in (("r-old", 1000), ("r-new", 3000), ("r-mid", 2000)):
        manifest.write(tmp_path / run_id / manifest.MANIFEST_NAME, _doc(run_id, started))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / manifest.MANIFEST_NAME).write_text("{not json")
    latest = manifest.latest(tmp_path)
    assert latest.parent.name == "r-new"
    assert manifest.read(latest)["run_id"] == "r-new"
    assert manifest.resolve(tmp_path, None) == latest
    assert manifest.resolve(tmp_path, "r-old").parent.name == "r-old"
    assert manifest.resolve(tmp_path, str(tmp_path / "r-mid")).parent.name == "r-mid"
    with pytest.raises(ManifestError):
        manifest.resolve(tmp_path, "r-none")


def test_no_runs(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        manifest.latest(tmp_path / "nowhere")


def test_read_rejects_other_json(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(orjson.dumps({"hello": 1}))
    with pytest.raises(ManifestError):
        manifest.read(path)


def test_expectations() -> None:
    exp = manifest.expectations(_doc("r", 0))
    a, b = exp.devices["a"], exp.devices["b"]
    assert (a.sent, a.qos, a.unacked, a.skew_ms) == (5, 1, frozenset({5}), -300)
    assert a.skip_latency == frozenset({2, 3})
    assert (b.sent, b.qos) == (2, 0)
    assert exp.dlq == {"not_json": 2}
    assert (exp.started_at_ms, exp.ended_at_ms) == (0, 1000)


def test_start_offsets() -> None:
    doc = _doc("r", 0)
    assert manifest.start_offsets(doc, "telemetry") == {0: 10, 1: 0}
    assert manifest.start_offsets(doc, "dlq") is None


def test_expected_dlq_counts_only_acknowledged_sends() -> None:
    malformed: list[dict[str, object]] = [
        {"expected_error": "not_json", "acked": True},
        {"expected_error": "not_json", "acked": False},
        {"expected_error": "oversized", "acked": True},
        {"expected_error": "oversized"},
    ]
    assert manifest.expected_dlq(malformed) == {"not_json": 1, "oversized": 2}
