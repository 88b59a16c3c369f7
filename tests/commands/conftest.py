"""Fixtures of the command path's integration tests: a private set of topics per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from commands.client import CommandClient
from commands.config import CommandConfig
from commands.service import CommandService
from tests.commands.harness import Device, Records, forget_session, unique
from tests.plugins.mqtt_logins import bridge_login_settings


@dataclass
class CommandEnv:
    """One test's command path: config (unique topics, group, client id) and helpers."""

    config: CommandConfig
    client: CommandClient
    records: Records
    devices: list[Device]

    def device(self, name: str = "dev", **kwargs: Any) -> Device:
        cfg = self.config
        device = Device(unique(name), cfg.mqtt_host, cfg.mqtt_port, **kwargs)
        self.devices.append(device)
        return device

    def statuses(self, command_id: str) -> list[Any]:
        return self.records.statuses(self.config.topic_command_status, command_id)

    def final(self, command_id: str) -> Any:
        finals = [s for s in self.statuses(command_id) if s.final]
        return finals[-1] if finals else None

    def wait_final(self, command_id: str, timeout: float) -> Any:
        self.records.wait(
            lambda: self.final(command_id) is not None, timeout, f"{command_id} final"
        )
        return self.final(command_id)

    def replies(self, command_id: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.records.values(self.config.topic_command_replies)
            if r.get("command_id") == command_id
        ]

    def bridge_settings(self) -> dict[str, Any]:
        """This test's command settings for ``bridge_factory`` (``iot-bridge`` subprocess)."""
        cfg = self.config
        names = (
            "topic_commands",
            "topic_command_status",
            "topic_command_replies",
            "topic_commands_dlq",
            "command_group_id",
            "command_mqtt_client_id",
            "command_timeout_ms",
        )
        return {"commands_enabled": True, **{n: getattr(cfg, n) for n in names}}

    def dead_letters(self) -> list[dict[str, Any]]:
        return self.records.values(self.config.topic_commands_dlq)


@pytest.fixture
def command_env(
    stack: Any, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> Iterator[CommandEnv]:
    config = CommandConfig(
        mqtt_host=stack.mqtt_host,
        mqtt_port=stack.mqtt_port,
        kafka_bootstrap=stack.kafka_bootstrap,
        topic_commands=topic_factory("cmd", partitions=4),
        topic_command_status=topic_factory("cmdstatus", partitions=4, compacted=True),
        topic_command_replies=topic_factory("cmdreplies", partitions=4),
        topic_commands_dlq=topic_factory("cmddlq", partitions=2),
        command_group_id=group_factory(),
        command_mqtt_client_id=unique("cmd-bridge"),
        commands_enabled=True,
        **bridge_login_settings(stack.mqtt_port),
        command_timeout_ms=2000,
        http_port=0,
        shutdown_timeout_s=5.0,
    )
    client = CommandClient(
        config.kafka_bootstrap,
        topic_commands=config.topic_commands,
        topic_status=config.topic_command_status,
        topic_replies=config.topic_command_replies,
    )
    records = Records(
        config.kafka_bootstrap,
        [config.topic_command_status, config.topic_command_replies, config.topic_commands_dlq],
    )
    env = CommandEnv(config, client, records, [])
    yield env
    for device in env.devices:
        device.disconnect()
        if device.persistent:
            forget_session(config.mqtt_host, config.mqtt_port, device.device_id)
    forget_session(config.mqtt_host, config.mqtt_port, config.command_mqtt_client_id)
    records.close()
    client.close()


@pytest.fixture
def service_factory(command_env: CommandEnv) -> Iterator[Callable[..., CommandService]]:
    """Start `CommandService` in this process on the test's config; stopped at teardown."""
    started: list[CommandService] = []

    def make(**changes: Any) -> CommandService:
        cfg = command_env.config.with_changes(**changes) if changes else command_env.config
        service = CommandService(cfg)
        service.start()
        started.append(service)
        return service

    yield make
    for service in started:
        service.stop(10.0)
        assert service.failure is None, f"command service failed: {service.failure!r}"
