"""`python -m bench.commands_rtt` argument handling (only paths that exit before running)."""

from __future__ import annotations

import pytest

from bench.commands import cli


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
    assert cli.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_lists_the_condition_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--telemetry-rate", "--command-path", "--responder", "--out-dir"):
        assert option in out
