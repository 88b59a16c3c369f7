import pytest

from bridge.cli import main


def test_help_lists_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--mqtt-receive-maximum" in out
    assert "IOT_TOPIC_TELEMETRY" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "iot-bridge" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-flag"]) == 2
    assert main(["--mqtt-port", "0"]) == 2
    assert "mqtt_port" in capsys.readouterr().err


def test_the_bridge_alone_knows_no_command_path_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # `iot-bridge` (commands/inline.py) runs the command path; the bridge does not import it
    assert main(["--commands-enabled"]) == 2
    assert "--commands-enabled" in capsys.readouterr().err
