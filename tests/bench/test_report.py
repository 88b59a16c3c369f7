"""Rendering a suite run (JSON round trip, Markdown, PNG) without servers."""

from __future__ import annotations

import json
from pathlib import Path

from bench.cli import main
from bench.report import from_json, to_json, write_all
from bench.results import LIMIT, OURS, RunResult
from bench.suite_options import SuiteOptions, SuiteRun


def _run() -> SuiteRun:
    run = SuiteRun(
        options=SuiteOptions(payloads=(1024,), duration_s=5.0, mosquitto_autosave_changes=10_000),
        machine={"cpu": "test cpu", "cores": 2, "loadavg_before": ["0.1", "0.2", "0.3"]},
    )
    run.started_at, run.finished_at, run.wall_s = "t0", "t1", 12.0
    run.curves = {"0/throughput/x/1024/1/1000": [(0.0, 0), (1.0, 1000)]}
    run.results = [
        RunResult(LIMIT, "throughput", 1024, 1000, 1, msgs_per_s=50_000.0, lost=0),
        RunResult(
            OURS,
            "throughput",
            1024,
            1000,
            1,
            msgs_per_s=45_000.0,
            lost=0,
            duplicates=0,
            reordered=0,
            published=450_000,
            curve_key="0/throughput/x/1024/1/1000",
        ),
        RunResult(OURS, "scaling", 1024, 1000, 1, processes=2, msgs_per_s=60_000.0),
        RunResult(
            OURS,
            "latency-low",
            1024,
            1000,
            1,
            offered_rate=450.0,
            latency_p50_ms=3.0,
            latency_p99_ms=11.0,
            to_bridge_p50_ms=1.0,
            to_bridge_p99_ms=4.0,
            to_kafka_p50_ms=2.0,
            to_kafka_p99_ms=9.0,
        ),
    ]
    return run


def test_markdown_states_the_targets(tmp_path: Path) -> None:
    paths = write_all(_run(), tmp_path)
    text = paths["md"].read_text()
    assert "sustains **0.90** of the same-run Mosquitto one-to-one ceiling" in text
    assert "| 1024 | 1,000 | 2 | 60,000 | 1.33 |" in text
    assert "### Spread over the repeated throughput runs" in text
    assert "at 1 % of our maximum (450 msgs/s): our bridge p50 3 / p99 11 ms" in text
    assert "; publish -> bridge p50 1 / p99 4 ms, bridge -> Kafka p50 2 / p99 9 ms." in text
    assert "Mosquitto saves its store every 10,000 changes." in text
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_round_trip_and_report_command(tmp_path: Path) -> None:
    data = to_json(_run())
    again = from_json(json.loads(json.dumps(data)))
    assert [r.to_dict() for r in again.results] == data["results"]
    src = tmp_path / "ingest.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "out"
    assert main(["report", str(src), "--out", str(out)]) == 0
    assert "0.90" in (out / "ingest.md").read_text()
