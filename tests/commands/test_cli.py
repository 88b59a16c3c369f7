"""``iot-cmd``: usage errors (unit) and send/status/watch against the real servers."""

from __future__ import annotations

import orjson
import pytest

from commands import cli
from commands.cli import main
from commands.service import CommandService
from mqtt_codec import MqttProtocolError
from tests.commands.conftest import CommandEnv
from tests.commands.test_service import ServiceFactory


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "send" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert "iot-cmd" in capsys.readouterr().out
    for sub in ("send", "status", "watch", "serve"):
        assert main([sub, "--help"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["send"],
        ["send", "dev/1", "reboot"],
        ["send", "dev-1", "reboot", "--args", "{nope"],
        ["send", "dev-1", "reboot", "--args", "[1]"],
        ["send", "dev-1", "reboot", "--attempts", "0"],
        ["send", "dev-1", "reboot", "--timeout", "-1"],
        ["nope"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err


def test_an_mqtt_protocol_error_is_a_plain_runtime_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the codec's error is no BridgeError (mqtt_codec imports nothing of the bridge) yet
    # iot-cmd reports it as one: its message, exit 1
    def broken(_ns: object) -> int:
        raise MqttProtocolError("malformed variable byte integer")

    monkeypatch.setattr(cli, "_cmd_serve", broken)
    assert main(["serve"]) == 1
    assert capsys.readouterr().err.strip() == "iot-cmd: malformed variable byte integer"


def _kafka_flags(env: CommandEnv) -> list[str]:
    cfg = env.config
    return [
        "--kafka-bootstrap",
        cfg.kafka_bootstrap,
        "--topic-commands",
        cfg.topic_commands,
        "--topic-command-status",
        cfg.topic_command_status,
        "--topic-command-replies",
        cfg.topic_command_replies,
    ]


@pytest.mark.integration
def test_send_wait_status_and_watch(
    command_env: CommandEnv,
    service_factory: ServiceFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = command_env
    ok = env.device().connect()
    silent = env.device(mode="silent").connect()
    service: CommandService = service_factory()
    assert service.is_alive()
    flags = _kafka_flags(env)

    argv = ["send", ok.device_id, "add", "--args", '{"a": 4, "b": 5}', "--wait", "--json"]
    assert main([*argv, "--id", "cli-ok-1", *flags]) == 0
    out = capsys.readouterr().out.splitlines()
    states = [orjson.loads(line)["state"] for line in out if not line.startswith("reply ")]
    assert states == ["accepted", "sent", "delivered", "succeeded"]
    [reply] = [orjson.loads(line[6:]) for line in out if line.startswith("reply ")]
    assert reply["result"] == {"sum": 9, "by": ok.device_id}

    argv = ["send", silent.device_id, "ping", "--timeout", "0.3", "--attempts", "2", "--wait"]
    assert main([*argv, "--id", "cli-silent-1", *flags]) == 4  # expired
    assert "expired" in capsys.readouterr().out.splitlines()[-1]

    assert main(["status", "cli-ok-1", "--json", *flags]) == 0
    status = orjson.loads(capsys.readouterr().out.splitlines()[0])
    assert (status["command_id"], status["state"]) == ("cli-ok-1", "succeeded")
    assert main(["status", "no-such-id", *flags]) == 1

    assert main(["watch", "--from-beginning", "--json", "--count", "3", *flags]) == 0
    watched = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(watched) == 3
    assert all(w["command_id"] in ("cli-ok-1", "cli-silent-1") for w in watched)
