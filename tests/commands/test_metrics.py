"""The command path's metrics and health: the mapping (unit), ``iot-cmd serve`` and
``iot-bridge --commands-enabled`` exporting them (integration, real servers)."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from commands.config import CommandConfig
from commands.metrics import COUNTERS, CommandHealth, command_registry, health_server
from commands.model import State
from commands.service import CommandService
from stack.ports import free_port
from tests.commands.conftest import CommandEnv
from tests.commands.harness import wait_for
from tests.plugins.jvm_options import environ_without_settings

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class FakeService:
    stats: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    pending: int = 0
    alive: bool = False

    def is_alive(self) -> bool:
        return self.alive


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_every_stats_counter_is_exported_with_its_value() -> None:
    fake = FakeService(pending=7, alive=True)
    fake.stats.update(
        commands=10, rejected=20, published=30, replies=40, unknown_replies=50, expired=60
    )
    fake.stats.update(adopted=70, foreign_replies=80)
    samples = _samples(generate_latest(command_registry(fake)).decode())
    assert samples == {
        "iot_commands_commands_total": 10,
        "iot_commands_rejected_total": 20,
        "iot_commands_published_total": 30,
        "iot_commands_replies_total": 40,
        "iot_commands_unknown_replies_total": 50,
        "iot_commands_foreign_replies_total": 80,
        "iot_commands_expired_total": 60,
        "iot_commands_adopted_total": 70,
        "iot_commands_consumer_renewals_total": 0,
        "iot_commands_pending": 7,
        "iot_commands_up": 1,
    }
    fake.alive = False
    fake.stats["replies"] += 1
    samples = _samples(generate_latest(command_registry(fake)).decode())
    assert samples["iot_commands_up"] == 0
    assert samples["iot_commands_replies_total"] == 41


def test_a_counter_the_service_adds_later_is_exported_too() -> None:
    fake = FakeService(stats={"commands": 2, "new_thing": 5})
    samples = _samples(generate_latest(command_registry(fake)).decode())
    assert samples["iot_commands_new_thing_total"] == 5
    assert samples["iot_commands_commands_total"] == 2
    assert samples["iot_commands_expired_total"] == 0  # a listed counter is there from the start


def test_the_real_services_counters_are_all_exported() -> None:
    service = CommandService(CommandConfig())  # built, not started: nothing connects
    samples = _samples(generate_latest(command_registry(service)).decode())
    names = {f"iot_commands_{key}_total" for key in service.stats}
    names |= {  # the operators' contract (docs/commands.md, "Metrics")
        f"iot_commands_{key}_total"
        for key in (
            "commands",
            "rejected",
            "published",
            "replies",
            "unknown_replies",
            "expired",
            "adopted",
            "consumer_renewals",
        )
    }
    assert names | {"iot_commands_pending", "iot_commands_up"} <= set(samples)
    assert samples["iot_commands_up"] == 0


def test_health_while_starting_running_and_after() -> None:
    fake = FakeService()
    health = CommandHealth(fake)
    assert (health.alive(), health.ready()) == (True, False)  # start() still rebuilding
    health.mark_started()
    fake.alive = True
    assert (health.alive(), health.ready()) == (True, True)
    fake.alive = False  # the worker thread ended
    assert (health.alive(), health.ready()) == (False, False)

    failed = CommandHealth(FakeService())
    failed.mark_start_failed()
    assert (failed.alive(), failed.ready()) == (False, False)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return 0, ""


def test_health_server_answers_from_the_service_state() -> None:
    fake = FakeService()
    health = CommandHealth(fake)
    server = health_server("127.0.0.1", 0, health)
    server.start()
    try:
        assert _get(server.port, "/healthz")[0] == 200
        assert _get(server.port, "/readyz")[0] == 503
        health.mark_started()
        fake.alive = True
        fake.stats["published"] = 3
        assert _get(server.port, "/readyz")[0] == 200
        code, text = _get(server.port, "/metrics")
        assert code == 200
        assert _samples(text)["iot_commands_published_total"] == 3
        fake.alive = False
        assert _get(server.port, "/healthz")[0] == 503
        assert _get(server.port, "/readyz")[0] == 503
    finally:
        server.stop()


# --- integration: the real processes ----------------------------------------------------------


class ServeProcess:
    """``iot-cmd serve`` as a subprocess with a test's settings."""

    def __init__(self, settings: dict[str, Any], log_path: Path) -> None:
        env = environ_without_settings()
        for name, value in settings.items():
            text = ("1" if value else "0") if isinstance(value, bool) else str(value)
            env["IOT_" + name.upper()] = text
        env["PYTHONUNBUFFERED"] = "1"
        self.port = int(settings["command_http_port"])
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "commands.cli", "serve"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def get(self, path: str) -> tuple[int, str]:
        return _get(self.port, path)

    def metrics(self) -> dict[str, float]:
        code, text = self.get("/metrics")
        assert code == 200, code
        return _samples(text)

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"iot-cmd serve exited:\n{self.log_path.read_text()}")
            return self.get("/readyz")[0] == 200

        wait_for(ready, timeout, "iot-cmd serve /readyz")

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


@pytest.fixture
def serve_factory(command_env: CommandEnv, tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    made: list[ServeProcess] = []

    def make(**changes: Any) -> ServeProcess:
        cfg = command_env.config
        names = (
            "mqtt_host",
            "mqtt_port",
            "mqtt_username",  # the test login (command_env's)
            "mqtt_password_file",
            "kafka_bootstrap",
            "topic_commands",
            "topic_command_status",
            "topic_command_replies",
            "topic_commands_dlq",
            "command_group_id",
            "command_mqtt_client_id",
            "command_timeout_ms",
            "shutdown_timeout_s",
        )
        settings = {n: getattr(cfg, n) for n in names}
        settings.update(command_http_port=free_port(), log_format="json", **changes)
        proc = ServeProcess(settings, tmp_path / f"serve-{len(made)}.log")
        made.append(proc)
        return proc

    yield make
    for proc in made:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(10)


@pytest.mark.integration
def test_serve_is_ready_and_counts_a_command_round_trip(
    command_env: CommandEnv, serve_factory: Callable[..., ServeProcess]
) -> None:
    env = command_env
    device = env.device().connect()
    serve = serve_factory()
    serve.wait_ready()
    assert serve.get("/healthz")[0] == 200
    before = serve.metrics()
    assert before["iot_commands_up"] == 1
    assert before["iot_commands_commands_total"] == 0

    cid = env.client.send(device.device_id, "add", {"a": 1, "b": 2}, timeout_ms=5000)
    assert env.wait_final(cid, 30).state is State.SUCCEEDED

    def counted() -> bool:
        m = serve.metrics()
        return m["iot_commands_replies_total"] == 1 and m["iot_commands_pending"] == 0

    wait_for(counted, 10, "the reply counted")
    after = serve.metrics()
    assert after["iot_commands_commands_total"] == 1
    assert after["iot_commands_published_total"] == 1
    assert after["iot_commands_unknown_replies_total"] == 0
    assert after["iot_commands_expired_total"] == 0
    assert serve.stop() == 0


@pytest.mark.integration
def test_inline_bridge_exports_the_command_metrics(
    command_env: CommandEnv, bridge_factory: Callable[..., Any]
) -> None:
    env = command_env
    cfg = env.config
    device = env.device().connect()
    bridge = bridge_factory(
        cfg.mqtt_host, cfg.mqtt_port, cfg.kafka_bootstrap, **env.bridge_settings()
    )
    cid = env.client.send(device.device_id, "add", {"a": 2, "b": 3}, timeout_ms=5000)
    assert env.wait_final(cid, 30).state is State.SUCCEEDED
    wait_for(
        lambda: bridge.metric("iot_commands_replies_total") == 1, 10, "the reply counted inline"
    )
    assert bridge.metric("iot_commands_commands_total") == 1
    assert bridge.metric("iot_commands_up") == 1
    assert "iot_bridge_acked_total" in bridge.metrics()  # beside the telemetry path's own
