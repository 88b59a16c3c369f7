"""The command phase of `make bench-amqp` against the session's Kafka and Mosquitto: a few
devices, a few commands, every one answered and measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.amqp_cmd import command_phase
from bench.amqp_cmd_model import CommandSettings
from stack.secret_files import write_secret
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def test_a_few_commands_all_come_back_measured(
    stack: Endpoints,
    transactions_ready: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    login = None
    if stack.login is not None:  # the session's Mosquitto logs clients in
        secret = tmp_path / "mqtt.secret"
        write_secret(secret, stack.login.password)
        login = (stack.login.username, secret)
    settings = CommandSettings(devices=3, rate=10, seconds=1.2, timeout_s=20)
    got = command_phase(
        stack.kafka_bootstrap, (stack.mqtt_host, stack.mqtt_port), settings, tmp_path, login
    )
    assert got["cmd_sent"] == settings.planned == 12
    assert (got["cmd_replied"], got["cmd_lost"], got["cmd_refused"]) == (12, 0, 0)
    assert got["cmd_bad_replies"] == 0
    assert 0 < got["cmd_down_p50_ms"] <= got["cmd_rtt_p50_ms"] <= got["cmd_rtt_p99_ms"]
    assert got["cmd_amqp_cpu_ms_per_cmd"] > 0
