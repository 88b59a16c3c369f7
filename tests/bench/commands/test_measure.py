"""The command benchmark's pure parts: options, the stage breakdown, the report, CPU accounting."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from bench import commands_rtt
from bench.commands_rtt import (
    HALF,
    CpuWindow,
    half_of,
    parse_telemetry_rate,
    render_markdown,
    stage_breakdown,
    tree_cpu_seconds,
)
from bench.procstat import cpu_seconds
from bridge.commands.model import State


def test_telemetry_rate_accepts_half_or_a_number() -> None:
    assert parse_telemetry_rate("half") is None
    assert parse_telemetry_rate(" HALF ") is None
    assert parse_telemetry_rate("25000") == 25000.0
    assert parse_telemetry_rate("0") == 0.0
    for bad in ("-1", "nan", "fast"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_telemetry_rate(bad)


def test_half_rounds_to_hundreds() -> None:
    assert half_of(51_213.0) == 25_600.0
    assert half_of(13_659.3) == 6_800.0
    assert half_of(90.0) == 100.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--telemetry-rate", "lots"],
        ["--command-path", "sideways"],
        ["--responder", "nobody"],
        ["--mqtt-port", "1883"],  # without --kafka-bootstrap
        ["--max-duration", "2"],
        ["--rate", "0"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert commands_rtt.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_lists_the_condition_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert commands_rtt.main(["--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--telemetry-rate", "--command-path", "--responder", "--out-dir"):
        assert option in out


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


def test_tree_cpu_counts_each_process_once() -> None:
    me = os.getpid()
    alone = tree_cpu_seconds([me], {})
    # a cycle or a repeated child must not count this process twice
    twice = tree_cpu_seconds([me, me], {me: [me]})
    own = cpu_seconds(me)
    assert alone is not None
    assert twice is not None
    assert own is not None
    assert alone <= twice <= own  # counted twice, it would exceed the later reading
    assert tree_cpu_seconds([2**22 + 12345], {}) is None


def test_cpu_window_measures_work_done_between_marks() -> None:
    me = os.getpid()
    window = CpuWindow({"me": lambda: [me], "gone": list}, alone=frozenset({"me"}))
    window.start()
    end = cpu_seconds(me) or 0.0
    while (cpu_seconds(me) or 0.0) < end + 0.2:  # burn 0.2 CPU s
        sum(range(10_000))
    used = window.stop()
    assert used["me"] is not None
    assert 0.19 <= used["me"] < 1.0
    assert used["gone"] is None
    assert used["total"] == used["me"]
    machine = used[commands_rtt.MACHINE]
    assert machine is not None
    # /proc/stat and /proc/<pid>/stat count in clock ticks, sampled a moment apart: the
    # machine's figure holds this process's work to within two ticks (CI once read 0.18)
    assert machine >= used["me"] - 2 / os.sysconf("SC_CLK_TCK")


def test_disturbance_note_only_when_others_used_the_machine() -> None:
    machine = commands_rtt.MACHINE
    quiet = {"total": 12.0, machine: 13.0}  # 1 of 20 CPU s: 5%
    busy = {"total": 12.1, machine: 19.97}
    assert commands_rtt.disturbance_note(quiet, 10.0, 2) is None
    note = commands_rtt.disturbance_note(busy, 10.0, 2)
    assert note == (
        "DISTURBED? work outside the benchmark's processes (other users, the kernel) used "
        "7.9 CPU s of the 20.0 available in the measured window (39% of the machine)"
    )
    assert commands_rtt.disturbance_note({"total": None, machine: 5.0}, 10.0, 2) is None


def test_timeline_rows_per_second_of_sending() -> None:
    from bench.commands_rtt import build_timeline
    from bridge.commands.model import State

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
    from bench.commands_rtt import recorded_maximum

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
