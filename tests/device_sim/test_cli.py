"""iot-sim's command line: help, usage errors, missing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_sim.cli import build_parser, main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "run" in capsys.readouterr().out
    assert main(["run", "--help"]) == 0
    assert "--devices" in capsys.readouterr().out
    assert main(["verify", "--help"]) == 0


def test_usage_errors_exit_two(tmp_path: Path) -> None:
    assert main([]) == 2
    assert main(["run", "--qos", "2"]) == 2
    assert main(["run", "--anomaly-rate", "3"]) == 2
    assert main(["run", "--count", "5", "--duration", "3"]) == 2
    assert main(["run", "--devices", "0", "--runs-dir", str(tmp_path)]) == 2
    assert main(["run", "--malformed-kinds", "bogus", "--runs-dir", str(tmp_path)]) == 2


def test_verify_without_runs_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--runs-dir", str(tmp_path)]) == 1
    assert "no run manifest" in capsys.readouterr().err


def test_env_defaults_match_the_bridge_names() -> None:
    env = {
        "IOT_MQTT_HOST": "mq",
        "IOT_MQTT_PORT": "1999",
        "IOT_KAFKA_BOOTSTRAP": "k:1",
        "IOT_TOPIC_TELEMETRY": "t.tel",
        "IOT_TOPIC_DLQ": "t.dlq",
        "IOT_SIM_RUNS_DIR": "/x/runs",
    }
    args = build_parser(env).parse_args(["verify"])
    assert (args.mqtt_host, args.mqtt_port, args.kafka_bootstrap) == ("mq", 1999, "k:1")
    assert (args.topic_telemetry, args.topic_dlq) == ("t.tel", "t.dlq")
    assert args.runs_dir == Path("/x/runs")
    flags = build_parser(env).parse_args(["verify", "--mqtt-port", "7"])
    assert flags.mqtt_port == 7
