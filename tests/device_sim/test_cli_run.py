"""iot-sim run's options: the FleetSpec and RunOptions they describe."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from device_sim.cli import build_parser
from device_sim.cli_options import from_args
from device_sim.cli_run import DEFAULT_MAX_PAYLOAD, _summary, _totals_json, spec_from
from device_sim.run_config import RunOptions
from device_sim.spec import FleetSpec


def test_spec_defaults_to_ten_seconds_and_the_bridge_payload_limit() -> None:
    args = build_parser({}).parse_args(["run"])
    spec = spec_from(args, {})
    assert spec.duration_s == 10.0
    assert spec.count is None
    assert spec.oversize_bytes == DEFAULT_MAX_PAYLOAD + 1024
    assert spec == FleetSpec(oversize_bytes=DEFAULT_MAX_PAYLOAD + 1024)


def test_spec_takes_every_traffic_and_injection_option() -> None:
    argv = ["run", "--devices", "3", "--count", "4", "--seed", "9", "--qos", "0", "--poisson"]
    argv += ["--malformed-kinds", "oversized", "--anomaly-rate", "0.25", "--churn-rate", "0.5"]
    argv += ["--silent-fraction", "0.5", "--reply-latency-ms", "5", "--device-prefix", "x"]
    env = {"IOT_MAX_PAYLOAD_BYTES": "1000"}
    spec = spec_from(build_parser(env).parse_args(argv), env)
    assert (spec.devices, spec.count, spec.duration_s, spec.seed) == (3, 4, None, 9)
    assert (spec.qos, spec.poisson, spec.device_prefix) == (0, True, "x")
    assert spec.malformed_kinds == ("oversized",)
    assert (spec.anomaly_rate, spec.churn_rate, spec.silent_fraction) == (0.25, 0.5, 0.5)
    assert spec.reply_latency_ms == 5.0
    assert spec.oversize_bytes == 2024


def test_run_options_from_the_negated_flags() -> None:
    args = build_parser({}).parse_args(
        ["run", "--processes", "2", "--no-offsets", "--no-sync-start", "--drain-timeout-s", "3"]
    )
    options = from_args(
        RunOptions, args, record_offsets=not args.no_offsets, sync_start=not args.no_sync_start
    )
    assert options == RunOptions(
        processes=2, drain_timeout_s=3.0, record_offsets=False, sync_start=False
    )


def test_summary_and_json_lines() -> None:
    doc = {
        "run_id": "r-1",
        "status": "complete",
        "totals": {
            "telemetry_sent": 12345,
            "malformed_sent": 2,
            "msgs_per_s": 4989.4,
            "unacked": 0,
            "publish_errors": 1,
            "devices_failed": 0,
            "cpu_seconds": 7.6,
        },
    }
    path = Path("runs/r-1/manifest.json")
    assert _summary(doc, path, 1000) == (
        "run r-1 complete: 12,345 telemetry + 2 malformed from 1000 devices, 4,989 msg/s, "
        "unacknowledged 0, errors 1, devices failed 0, CPU 7.6 s\n"
        "manifest runs/r-1/manifest.json\nverify with: iot-sim verify r-1\n"
    )
    doc["totals"] = {"msgs_per_s": None}
    assert "from 3 devices, - msg/s," in _summary(doc, path, 3)
    assert orjson.loads(_totals_json(doc, path)) == {
        "run_id": "r-1",
        "manifest": "runs/r-1/manifest.json",
        "msgs_per_s": None,
    }


def test_events_and_rate_shape_options_and_their_env() -> None:
    argv = ["run", "--event-rate", "0.1", "--diurnal-period", "600", "--diurnal-min", "0.5"]
    argv += ["--burst-every", "60", "--burst-factor", "3", "--burst-duration", "5"]
    spec = spec_from(build_parser({}).parse_args(argv), {})
    assert (spec.event_rate, spec.diurnal_period, spec.diurnal_min, spec.diurnal_max) == (
        0.1,
        600.0,
        0.5,
        1.0,
    )
    assert (spec.burst_every, spec.burst_factor, spec.burst_duration) == (60.0, 3.0, 5.0)
    env = {
        "IOT_SIM_EVENT_RATE": "0.2",
        "IOT_SIM_DIURNAL_PERIOD": "300",
        "IOT_SIM_DIURNAL_MIN": "0.1",
        "IOT_SIM_DIURNAL_MAX": "2",
        "IOT_SIM_BURST_EVERY": "30",
        "IOT_SIM_BURST_FACTOR": "4",
        "IOT_SIM_BURST_DURATION": "2",
    }
    spec = spec_from(build_parser(env).parse_args(["run"]), env)
    assert spec.rate_shape().factor(150) == 2.0  # midday
    assert (spec.event_rate, spec.burst_every, spec.burst_factor, spec.burst_duration) == (
        0.2,
        30.0,
        4.0,
        2.0,
    )
    # a flag beats its variable
    spec = spec_from(build_parser(env).parse_args(["run", "--event-rate", "0"]), env)
    assert spec.event_rate == 0.0


def test_each_new_option_has_help_naming_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser({}).parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, env in [
        ("--event-rate", "IOT_SIM_EVENT_RATE"),
        ("--diurnal-period", "IOT_SIM_DIURNAL_PERIOD"),
        ("--diurnal-min", "IOT_SIM_DIURNAL_MIN"),
        ("--diurnal-max", "IOT_SIM_DIURNAL_MAX"),
        ("--burst-every", "IOT_SIM_BURST_EVERY"),
        ("--burst-factor", "IOT_SIM_BURST_FACTOR"),
        ("--burst-duration", "IOT_SIM_BURST_DURATION"),
        ("--topic-events", "IOT_TOPIC_EVENTS"),
    ]:
        assert f"{flag} " in text, flag
        assert f"[env {env}," in text, flag


def test_summary_counts_events_when_there_were_some() -> None:
    doc = {
        "run_id": "r-2",
        "status": "complete",
        "totals": {"telemetry_sent": 100, "malformed_sent": 0, "events_sent": 1234},
    }
    assert "100 telemetry + 0 malformed + 1,234 events from 4 devices" in _summary(
        doc, Path("m.json"), 4
    )
