"""`iot-stack systemd`: the unit a production host runs the appliance with."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stack.cli import main
from stack.config import StackConfig
from stack.systemd_unit import UnitHost, render_unit, settings_environment


def _host(tmp_path: Path) -> UnitHost:
    return UnitHost(
        python=sys.executable,
        user="iot",
        group="iot",
        path="/usr/local/bin:/usr/bin:/bin",
        project_root=tmp_path / "checkout",
    )


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.fixture(autouse=True)
def _no_iot_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # the unit carries what the settings say, not what this test's environment happens to set
    for name in [n for n in os.environ if n.startswith("IOT_")]:
        monkeypatch.delenv(name)


def test_the_unit_restarts_on_failure_and_stops_its_children(tmp_path: Path) -> None:
    data = tmp_path / "var"
    config = StackConfig.from_env(data_dir=data, api_console=True, mqtt_port=1884)
    lines = _lines(render_unit(config, _host(tmp_path)))
    sections = [line for line in lines if line.startswith("[")]
    assert sections == ["[Unit]", "[Service]", "[Install]"]
    for expected in (
        "Type=forking",
        "User=iot",
        "Group=iot",
        f"ExecStart={sys.executable} -m stack.cli up",
        f"ExecStop={sys.executable} -m stack.cli down",
        f"PIDFile={data.resolve()}/run/supervisor.main-pid",
        "Restart=on-failure",
        "KillMode=mixed",
        "StartLimitIntervalSec=0",
        "LimitNOFILE=262144",
        "WantedBy=multi-user.target",
        "After=network-online.target",
        f"WorkingDirectory={tmp_path / 'checkout'}",
        'Environment="PATH=/usr/local/bin:/usr/bin:/bin"',
        f'Environment="IOT_DATA_DIR={data.resolve()}"',
        'Environment="IOT_MQTT_PORT=1884"',
        'Environment="IOT_STACK_CONSOLE=1"',
        "EnvironmentFile=-/etc/default/iot-stack",
    ):
        assert expected in lines, expected
    # `down` waits up to 60 s for Kafka alone: systemd must not SIGKILL before that
    [stop] = [line for line in lines if line.startswith("TimeoutStopSec=")]
    assert int(stop.split("=")[1]) >= 120
    # a default setting is not written (the defaults of a later version apply)
    assert not any("IOT_KAFKA_PORT" in line for line in lines)


def test_the_environment_gives_back_the_same_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = StackConfig.from_env(
        data_dir=tmp_path / "var", api_console=True, with_bridge=False, kafka_nodes=3,
        partitions=6, start_timeout=120.0, device_rate=0.5, bind_host="0.0.0.0",
    )  # fmt: skip
    env = settings_environment(config)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert StackConfig.from_env() == config


def test_paths_with_spaces_and_percent_are_quoted(tmp_path: Path) -> None:
    data = tmp_path / "my data %h"
    host = _host(tmp_path)
    text = render_unit(StackConfig.from_env(data_dir=data), host)
    # `%` is systemd's specifier character: doubled, or it would expand to the host name
    assert f'Environment="IOT_DATA_DIR={data.resolve()}"'.replace("%h", "%%h") in text
    assert f'PIDFile="{data.resolve()}/run/supervisor.main-pid"'.replace("%h", "%%h") in text


def test_the_cli_writes_the_unit_and_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    units = tmp_path / "units"
    data = tmp_path / "var"
    code = main(["systemd", "--data-dir", str(data), "--unit-dir", str(units), "--console"])
    assert code == 0
    text = (units / "iot-stack.service").read_text()
    user = pwd.getpwuid(os.getuid()).pw_name
    assert f"User={user}" in text
    assert f"Group={grp.getgrgid(os.getgid()).gr_name}" in text
    assert 'Environment="IOT_STACK_CONSOLE=1"' in text
    assert "systemctl enable --now iot-stack" in capsys.readouterr().err
    # without --unit-dir it prints the same unit
    assert main(["systemd", "--data-dir", str(data), "--console"]) == 0
    assert capsys.readouterr().out == text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "no-such-user-xyz"], "--user 'no-such-user-xyz': no such user"),
        (["--group", "no-such-group-xyz"], "--group 'no-such-group-xyz': no such group"),
        (["--unit-name", "x.service"], "a bare name like iot-stack"),
    ],
)
def test_bad_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["systemd", "--data-dir", str(tmp_path / "var"), *args])
    assert code == 1
    assert message in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    units = tmp_path / "units"
    assert main(["systemd", "--data-dir", str(tmp_path / "var"), "--unit-dir", str(units)]) == 0
    unit = units / "iot-stack.service"
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # unknown keys and bad values are only warnings (exit 0): none may name our unit
    complaints = [line for line in result.stderr.splitlines() if "iot-stack.service" in line]
    assert complaints == []
