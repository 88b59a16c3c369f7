"""The command benchmark's report: the Markdown page and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.commands.options import HALF
from bench.commands.report import full_document, render_markdown, write_outputs


def _doc(p99: float, missing: int = 0) -> dict[str, object]:
    result = {
        "started_at": "2026-11-21T15:00:00Z",
        "command_path": "separate",
        "responder": "raw",
        "devices": 1000,
        "target_rate": 1000.0,
        "duration_s": 10.0,
        "warmup_load_s": 15.0,
        "sent": 10_000,
        "succeeded": 10_000 - missing,
        "other_final": {},
        "missing": missing,
        "completed_per_s": 998.0,
        "rtt_ms_p50": 20.0,
        "rtt_ms_p90": 40.0,
        "rtt_ms_p99": p99,
        "rtt_ms_max": 300.0,
        "stages_ms": {"sent_to_delivered_p50": 3.0},
        "telemetry_mode": HALF,
        "telemetry_max_msgs_per_s": 50_000.0,
        "telemetry_max_measured": 42_000.0,
        "telemetry_max_recorded": 50_000.0,
        "telemetry_rate": 25_000.0,
        "telemetry_achieved_msgs_per_s": 24_500.0,
        "telemetry_in_kafka": 245_000,
        "telemetry_payload_bytes": 1024,
        "telemetry_devices": 1000,
        "telemetry_published": 700_000,
        "telemetry_acked": 700_000,
        "window_s": 10.0,
        "cpu_s": {"iot-bridge": 4.0, "mosquitto": None, "total": 4.0},
        "bridge_cpu_s": 4.0,
        "responder_counts": {"commands": 11_000},
        "notes": ["a note"],
    }
    return {"machine": {"cores": 2}, "argv": [], "result": result}


def test_markdown_states_condition_verdict_and_cost() -> None:
    text = render_markdown(_doc(p99=80.0))
    assert "**met**" in text
    assert "(50,000 msgs/s: the higher of 42,000 measured" in text
    assert "-> offered 25,000 msgs/s" in text
    assert "24,500 msgs/s into Kafka (245,000 records) = 0.49 of the maximum" in text
    assert "| iot-bridge | 4.00 | 0.40 |" in text
    assert "| mosquitto | - | - |" in text
    assert "- a note" in text


def test_markdown_misses_the_target_on_slow_p99_or_loss() -> None:
    assert "**missed**" in render_markdown(_doc(p99=150.0))
    assert "**missed**" in render_markdown(_doc(p99=50.0, missing=3))


def test_outputs_written_where_asked(tmp_path: Path) -> None:
    doc = _doc(p99=80.0)
    full = full_document(
        doc["result"],  # type: ignore[arg-type]
        finished_at="2026-11-21T15:01:00Z",
        wall_s=60.0,
        argv=["--duration", "10"],
        machine={"cores": 2},
    )
    assert full["started_at"] == "2026-11-21T15:00:00Z"
    assert full["argv"] == ["--duration", "10"]
    out = tmp_path / "result.json"
    write_outputs(full, out, tmp_path / "dir")
    assert json.loads(out.read_text()) == doc["result"]
    assert json.loads((tmp_path / "dir" / "commands.json").read_text()) == full
    assert "**met**" in (tmp_path / "dir" / "commands.md").read_text()


def test_the_page_says_what_mosquittos_saves_cost() -> None:
    doc = _doc(p99=900.0)
    result = doc["result"]
    assert isinstance(result, dict)
    result["mosquitto_saves"] = {
        "saves": 5,
        "written_mb": 2_400.0,
        "largest_mb": 610.0,
        "longest_s": 0.9,
        "share_of_window": 0.15,
    }
    text = render_markdown(doc)
    assert "Mosquitto's saves in the measured window: 5, 2,400 MB written (largest 610 MB" in text
    assert "15% of the window" in text
    assert "saves in the measured window: not read" in render_markdown(_doc(p99=50.0))
