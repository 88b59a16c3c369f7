from __future__ import annotations

import math

import pytest

from bench.amqp_cmd_model import (
    CommandSettings,
    device_of,
    due,
    figures,
    latency_summary,
    table,
)
from bench.amqp_upload import main


def test_default_settings_are_fine_and_plan_rate_times_seconds() -> None:
    settings = CommandSettings()
    assert settings.problems() == []
    assert settings.planned == int(settings.rate * settings.seconds)
    assert CommandSettings(rate=0.5, seconds=1).planned == 1  # never none at all


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        (CommandSettings(devices=0), "--command-devices"),
        (CommandSettings(rate=-1), "--command-rate"),
        (CommandSettings(rate=math.inf), "--command-rate"),
        (CommandSettings(seconds=0), "--command-seconds"),
        (CommandSettings(timeout_s=math.nan), "--command-timeout-s"),
    ],
)
def test_each_bad_setting_is_named(settings: CommandSettings, flag: str) -> None:
    assert [p.split()[0] for p in settings.problems()] == [flag]


def test_due_keeps_the_rate_since_the_start_and_stops_at_the_plan() -> None:
    assert due(0.0, 50, 0, 100) == 0
    assert due(0.001, 50, 0, 100) == 1  # the first goes at once
    assert due(1.0, 50, 1, 100) == 50  # 51 by t = 1 s
    assert due(1.0, 50, 60, 100) == 0  # ahead (credit came back late): nothing more
    assert due(10.0, 50, 90, 100) == 10  # never past the plan


def test_commands_go_round_robin() -> None:
    assert [device_of(n, 3) for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_latency_summary_is_nearest_rank_and_nan_when_empty() -> None:
    got = latency_summary([float(v) for v in range(1, 101)])
    assert got == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert all(math.isnan(v) for v in latency_summary([]).values())


def test_figures_count_lost_refused_and_cpu_per_answered_command() -> None:
    sent = {"c0": 0.0, "c1": 0.1, "c2": 0.2, "c3": 0.3}
    device = {"c0": 0.004, "c1": 0.106, "c2": 0.208}
    replied = {"c0": 0.010, "c1": 0.120, "late-warm-up": 9.0}
    got = figures(
        settings=CommandSettings(devices=2, rate=10),
        sent_at=sent, device_at=device, replied_at=replied, refused=1, bad_replies=0,
        send_span_s=0.4, cpu_amqp_s=0.02, cpu_command_path_s=None,
    )  # fmt: skip
    assert got["cmd_sent"] == 4
    assert got["cmd_per_s"] == pytest.approx(10.0)
    assert (got["cmd_replied"], got["cmd_refused"], got["cmd_lost"]) == (2, 1, 1)
    assert got["cmd_reply_span_s"] == pytest.approx(0.12)  # not to the warm-up's reply
    assert got["cmd_replies_per_s"] == pytest.approx(2 / 0.12)
    assert got["cmd_rtt_p50_ms"] == pytest.approx(10.0)
    assert got["cmd_rtt_p99_ms"] == pytest.approx(20.0)
    assert got["cmd_down_p50_ms"] == pytest.approx(6.0)
    assert got["cmd_amqp_cpu_ms_per_cmd"] == pytest.approx(10.0)  # 20 ms over 2 answered
    assert got["cmd_path_cpu_ms_per_cmd"] is None


def test_table_has_a_row_per_run_with_its_load() -> None:
    run = figures(
        settings=CommandSettings(devices=5, rate=20),
        sent_at={"c0": 0.0}, device_at={"c0": 0.005}, replied_at={"c0": 0.0123}, refused=0,
        bad_replies=0, send_span_s=1.0, cpu_amqp_s=0.003, cpu_command_path_s=0.001,
    )  # fmt: skip
    lines = table([{**run, "load_average": [6.25, 5.0, 4.0]}, run]).splitlines()
    assert len(lines) == 4
    assert lines[2] == (
        "| 1 | 6.2 | 5 | 20 / 1.0 / 81.3 | 12.3 / 12.3 / 12.3 | 0 / 0 | 3.00 / 1.00 |"
    )  # replied: 1 over 12.3 ms
    assert lines[3].startswith("| 2 | - | 5 |")


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--command-devices", "0"], "--command-devices must be > 0"),
        (["--command-rate", "nan"], "--command-rate must be > 0"),
        (["--only-commands", "--kafka-bootstrap", "k:9092"], "needs --mqtt-port"),
    ],
)
def test_bad_command_settings_are_refused_before_anything_starts(
    bad: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(bad)
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err
