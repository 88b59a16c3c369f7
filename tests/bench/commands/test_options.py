"""The command benchmark's options: the telemetry rate and the checks beyond each type."""

from __future__ import annotations

import argparse

import pytest

from bench.commands.options import build_parser, parse_telemetry_rate, usage_problem


def test_telemetry_rate_accepts_half_or_a_number() -> None:
    assert parse_telemetry_rate("half") is None
    assert parse_telemetry_rate(" HALF ") is None
    assert parse_telemetry_rate("25000") == 25000.0
    assert parse_telemetry_rate("0") == 0.0
    for bad in ("-1", "nan", "fast"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_telemetry_rate(bad)


def test_usage_problem_names_what_is_wrong() -> None:
    parser = build_parser()
    assert usage_problem(parser.parse_args([])) is None
    assert usage_problem(parser.parse_args(["--devices", "0"])) == (
        "--rate, --duration and --devices must be positive"
    )
    assert usage_problem(parser.parse_args(["--telemetry-processes", "0"])) == (
        "process and device counts must be positive"
    )
    assert usage_problem(parser.parse_args(["--kafka-bootstrap", "x:1"])) == (
        "--mqtt-port and --kafka-bootstrap go together"
    )


def test_mosquitto_autosave_changes_defaults_to_the_stacks_and_refuses_negatives() -> None:
    parser = build_parser()
    assert parser.parse_args([]).mosquitto_autosave_changes is None  # the stack's default
    assert parser.parse_args(["--mosquitto-autosave-changes", "0"]).mosquitto_autosave_changes == 0
    assert usage_problem(parser.parse_args(["--mosquitto-autosave-changes", "-1"])) == (
        "--mosquitto-autosave-changes must be >= 0"
    )
