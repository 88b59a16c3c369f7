"""``iot-bridge`` (commands/inline.py): the bridge, with the command path inline when enabled.
Running it on real servers: tests/commands/test_metrics.py, test_service.py (bridge_factory)."""

import pytest

from bridge.config import BridgeConfig
from commands.config import CommandConfig
from commands.inline import main, side_path


def test_help_lists_the_bridge_and_the_command_path_settings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--mqtt-receive-maximum" in out
    assert "IOT_TOPIC_TELEMETRY" in out
    assert "--commands-enabled" in out
    assert "IOT_COMMAND_TIMEOUT_MS" in out


def test_version_is_iot_bridge(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "iot-bridge" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-flag"]) == 2
    assert main(["--command-max-attempts", "0"]) == 2
    assert "command_max_attempts" in capsys.readouterr().err


def test_the_command_path_runs_inline_only_when_enabled() -> None:
    assert side_path(BridgeConfig()) is None
    assert side_path(CommandConfig()) is None
    assert side_path(CommandConfig(commands_enabled=True)) is not None
