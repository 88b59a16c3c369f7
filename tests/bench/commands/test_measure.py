"""The command benchmark's figures from known records: stages, timeline, the telemetry maximum."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.commands.measure import (
    build_timeline,
    half_of,
    other_finals,
    recorded_maximum,
    round_trips_ms,
    stage_breakdown,
)
from commands.model import State


def test_half_rounds_to_hundreds() -> None:
    assert half_of(51_213.0) == 25_600.0
    assert half_of(13_659.3) == 6_800.0
    assert half_of(90.0) == 100.0


def test_stage_breakdown_from_known_timestamps() -> None:
    # two commands sent at t=100.000 s and t=100.010 s (wall clock, seconds)
    sent_at = {"a": 100.000, "b": 100.010}
    marks = {
        "a": {"accepted": 100_005, "sent": 100_006, "delivered": 100_008, "succeeded": 100_012},
        "b": {"accepted": 100_030, "sent": 100_030, "delivered": 100_040, "succeeded": 100_050},
    }
    finals = {"a": (State.SUCCEEDED, 100.020), "b": (State.SUCCEEDED, 100.060)}
    stages = stage_breakdown(sent_at, marks, finals)
    # kafka -> command path: 5 ms and 20 ms; p50 of two values interpolates to the middle
    assert stages["kafka_to_command_path_p50"] == pytest.approx(12.5)
    assert stages["accepted_to_sent_p50"] == pytest.approx(0.5)
    assert stages["sent_to_delivered_p50"] == pytest.approx(6.0)
    assert stages["sent_to_succeeded_p99"] == pytest.approx(6 + (20 - 6) * 0.99)
    # status written at 100_012 ms, read at 100_020 ms: 8 ms; b: 10 ms
    assert stages["status_to_reader_p50"] == pytest.approx(9.0)


def test_stage_breakdown_without_data_is_none() -> None:
    stages = stage_breakdown({}, {}, {})
    assert set(stages.values()) == {None}


def test_timeline_rows_per_second_of_sending() -> None:
    sent_at = {"a": 100.0, "b": 100.5, "c": 101.2}
    finals = {"a": (State.SUCCEEDED, 100.02), "b": (State.SUCCEEDED, 100.9)}
    # monotonic samples 10 s behind the wall clock: (time, in Kafka, published)
    published = [(90.0, 0, 0), (90.5, 500, 600), (91.0, 1000, 1200), (91.5, 1400, 1700)]
    rows = build_timeline(sent_at, finals, published, 10.0)
    assert [r["second"] for r in rows] == [0, 1]
    assert rows[0]["commands"] == 2
    assert rows[0]["rtt_ms_max"] == 400.0
    assert rows[0]["telemetry_in_kafka_per_s"] == 1000
    assert rows[0]["telemetry_published_per_s"] == 1200
    assert rows[1]["rtt_ms_p99"] is None  # c never finished
    assert rows[1]["telemetry_in_kafka_per_s"] == 800


def test_recorded_maximum_reads_the_ingest_results(tmp_path: Path) -> None:
    doc = {
        "results": [
            {"contender": "iot-bridge-qos1", "scenario": "throughput", "payload_bytes": 1024,
             "processes": 1, "msgs_per_s": 51_000.0},
            {"contender": "iot-bridge-qos1", "scenario": "throughput-repeat",
             "payload_bytes": 1024, "processes": 1, "msgs_per_s": 49_000.0},
            {"contender": "iot-bridge-qos1", "scenario": "scaling", "payload_bytes": 1024,
             "processes": 2, "msgs_per_s": 54_000.0},
            {"contender": "mq-bridge", "scenario": "throughput", "payload_bytes": 1024,
             "processes": 1, "msgs_per_s": 60_000.0},
            {"contender": "iot-bridge-qos1", "scenario": "throughput", "payload_bytes": 200,
             "processes": 1, "msgs_per_s": 70_000.0},
        ]
    }  # fmt: skip
    path = tmp_path / "ingest.json"
    path.write_text(json.dumps(doc))
    assert recorded_maximum(path, 1024) == 51_000.0
    assert recorded_maximum(path, 512) is None
    assert recorded_maximum(tmp_path / "missing.json", 1024) is None


def test_round_trips_of_succeeded_commands_only_sorted() -> None:
    sent_at = {"a": 100.0, "b": 100.5, "c": 101.0, "d": 101.5}
    finals = {
        "a": (State.SUCCEEDED, 100.25),
        "b": (State.SUCCEEDED, 100.6),
        "c": (State.FAILED, 101.1),
    }
    assert round_trips_ms(sent_at, finals) == pytest.approx([100.0, 250.0])
    assert other_finals(finals) == {State.FAILED.value: 1}
    assert other_finals({}) == {}
