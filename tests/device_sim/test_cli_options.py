"""iot-sim's shared options: IOT_* defaults, the endpoint flags, options mapped onto dataclasses."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from device_sim.cli_options import add_endpoint_args, env_value, from_args, probability
from device_sim.errors import SimConfigError
from device_sim.run_config import Endpoints, RunOptions


def test_env_value_default_when_unset_or_empty_and_error_when_malformed() -> None:
    assert env_value({}, "IOT_X", 5, int) == 5
    assert env_value({"IOT_X": ""}, "IOT_X", 5, int) == 5
    assert env_value({"IOT_X": "7"}, "IOT_X", 5, int) == 7
    with pytest.raises(SimConfigError, match="IOT_X='seven'"):
        env_value({"IOT_X": "seven"}, "IOT_X", 5, int)


def test_endpoint_help_names_the_variable_and_a_non_empty_default() -> None:
    parser = argparse.ArgumentParser()
    add_endpoint_args(parser, {"IOT_LOG_LEVEL": "debug"})
    text = " ".join(parser.format_help().split())  # help is wrapped to the terminal
    assert "[env IOT_MQTT_PORT, default 1883]" in text
    assert "[env IOT_SIM_MQTT_USERNAME]" in text  # empty default: not shown
    assert "[env IOT_SIM_RUNS_DIR, default var/sim-runs]" in text
    args = parser.parse_args([])
    assert args.log_level == "DEBUG"
    assert args.runs_dir == Path("var/sim-runs")


def test_probability_bounds() -> None:
    assert probability("0") == 0.0
    assert probability("1") == 1.0
    with pytest.raises(argparse.ArgumentTypeError):
        probability("1.5")


def test_from_args_takes_fields_by_name_and_overrides() -> None:
    args = argparse.Namespace(
        processes=3, connect_rate=50.0, session_expiry_s=9, drain_timeout_s=1.5, unrelated=1
    )
    options = from_args(RunOptions, args, sync_start=False)
    assert options == RunOptions(
        processes=3, connect_rate=50.0, session_expiry_s=9, drain_timeout_s=1.5, sync_start=False
    )
    assert from_args(Endpoints, argparse.Namespace(mqtt_port=7)) == Endpoints(mqtt_port=7)
