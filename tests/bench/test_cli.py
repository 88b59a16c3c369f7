"""`python -m bench` argument handling (no servers: only paths that exit before running)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from bench.cli import main
from bench.suite_options import SuiteOptions


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert "--quick" in capsys.readouterr().out


def test_unknown_contender_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--contenders", "mosquitto-limit,kafka-connect"]) == 2
    assert "kafka-connect" in capsys.readouterr().err


def test_bad_payloads_and_missing_command_are_usage_errors() -> None:
    assert main(["run", "--payloads", "1k"]) == 2
    assert main([]) == 2


def test_bridge_processes_reach_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, ...]] = []

    def fake_run_suite(options: SuiteOptions) -> None:
        seen.append(options.bridge_processes)
        raise RuntimeError("not run in unit tests")

    monkeypatch.setattr("bench.suite.run_suite", fake_run_suite)
    assert main(["run", "--bridge-processes", "1,2,3"]) == 1
    assert main(["run", "--quick"]) == 1
    assert main(["run"]) == 1
    assert seen == [(1, 2, 3), (2,), (2, 4)]
    assert main(["run", "--bridge-processes", "1,x"]) == 2
    assert main(["run", "--bridge-processes", "0,2"]) == 2


def test_mosquitto_autosave_reaches_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int | None] = []

    def fake_run_suite(options: SuiteOptions) -> None:
        seen.append(options.mosquitto_autosave_changes)
        raise RuntimeError("not run in unit tests")

    monkeypatch.setattr("bench.suite.run_suite", fake_run_suite)
    assert main(["run", "--mosquitto-autosave-changes", "0"]) == 1
    assert main(["run"]) == 1  # None: the stack's own default
    assert seen == [0, None]
    assert main(["run", "--mosquitto-autosave-changes", "-1"]) == 2


def test_the_warmup_run_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def fake_run_suite(options: SuiteOptions) -> None:
        seen.append(options.warmup)
        raise RuntimeError("not run in unit tests")

    monkeypatch.setattr("bench.suite.run_suite", fake_run_suite)
    assert main(["run"]) == 1
    assert main(["run", "--no-warmup"]) == 1
    assert seen == [True, False]


def test_mqtt_shards_reach_the_suite_and_bad_counts_or_contenders_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[int] = []

    def fake_run_suite(options: SuiteOptions) -> None:
        seen.append(options.mqtt_shards)
        raise RuntimeError("not run in unit tests")

    monkeypatch.setattr("bench.suite.run_suite", fake_run_suite)
    sharded = ["run", "--contenders", "mosquitto-limit,iot-bridge-qos1"]
    assert main([*sharded, "--mqtt-shards", "2"]) == 1
    assert main(["run"]) == 1  # one Mosquitto, every contender
    assert seen == [2, 1]
    assert main([*sharded, "--mqtt-shards", "0"]) == 2
    assert "--mqtt-shards must be 1-64, got 0" in capsys.readouterr().err
    assert main(["run", "--mqtt-shards", "2"]) == 2  # mq-bridge and the others have no shards
    err = capsys.readouterr().err
    assert "leave out naive-bridge, mq-bridge, telegraf" in err
    assert seen == [2, 1]


def test_sigterm_unwinds_the_suite_so_its_finally_stops_the_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed with SIGTERM, the default action left Mosquitto, Kafka and the contender running;
    the suite must unwind instead, through the `finally` that stops them."""
    stopped: list[bool] = []

    def fake_run_suite(_options: SuiteOptions) -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at once; never reached
        finally:
            stopped.append(True)

    monkeypatch.setattr("bench.suite.run_suite", fake_run_suite)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exited:
        main(["run", "--quick"])
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handler is back
    assert stopped == [True]
    assert exited.value.code == 128 + signal.SIGTERM
