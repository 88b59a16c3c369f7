"""What the console scripts share: parser with --version, exit codes, the stop event."""

from __future__ import annotations

import os
import signal

import pytest

from bridge import __version__
from bridge.console import new_parser, parse_args, stop_on_signals


def test_the_parser_knows_its_name_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    parser = new_parser("iot-x", "does x", epilog="exit codes: none")
    parser.add_argument("--n", type=int)
    assert parse_args(parser, ["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"iot-x {__version__}"
    assert parse_args(parser, ["--n", "nope"]) == 2
    assert "iot-x: error" in capsys.readouterr().err
    ns = parse_args(parser, ["--n", "3"])
    assert not isinstance(ns, int)
    assert ns.n == 3


def test_a_signal_sets_the_stop_event_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with stop_on_signals(signal.SIGUSR1) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.wait(5)
    assert signal.getsignal(signal.SIGUSR1) == before
