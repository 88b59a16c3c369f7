"""`python -m bench` argument handling (no servers: only paths that exit before running)."""

from __future__ import annotations

import pytest

from bench.cli import main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert "--quick" in capsys.readouterr().out


def test_unknown_contender_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--contenders", "mosquitto-limit,kafka-connect"]) == 2
    assert "kafka-connect" in capsys.readouterr().err


def test_bad_payloads_and_missing_command_are_usage_errors() -> None:
    assert main(["run", "--payloads", "1k"]) == 2
    assert main([]) == 2
