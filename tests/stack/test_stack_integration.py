"""The launcher against the real servers (issue 2's tests)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Consumer, Producer
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from prometheus_client.parser import text_string_to_metric_families

from commands.client import CommandClient
from commands.model import State
from commands.status import StatusRecord
from stack.launcher import Stack
from stack.ports import free_port, free_ports
from tests.commands.harness import Device, Records, unique
from tests.conftest import Endpoints
from tests.plugins.mqtt_logins import set_login

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[object] = []
    producer.produce(topic, value, key, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None]


def _consume_all(bootstrap: str, topic: str, expect: int, timeout: float = 30) -> list[tuple]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[tuple] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def test_record_round_trips_through_kafka(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory("roundtrip", partitions=3)
    _produce(stack.kafka_bootstrap, topic, b"d1", b'{"seq": 1}')
    assert _consume_all(stack.kafka_bootstrap, topic, 1) == [(b"d1", b'{"seq": 1}')]


def _session_client(client_id: str) -> mqtt.Client:
    return mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)


def _connect(client: mqtt.Client, host: str, port: int) -> None:
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 3600
    set_login(client, port)
    client.connect(host, port, clean_start=False, properties=props)


def test_queued_qos1_message_survives_mosquitto_restart(
    local_stack_factory: Callable[..., Stack],
) -> None:
    local = local_stack_factory(partitions=1)
    host, port = local.mqtt_host, local.mqtt_port
    topic = "devices/d-restart/commands/reboot"

    subscriber = _session_client("persistent-sub")
    subscribed = threading.Event()
    subscriber.on_subscribe = lambda *_args: subscribed.set()
    _connect(subscriber, host, port)
    subscriber.loop_start()
    subscriber.subscribe(topic, qos=1)
    assert subscribed.wait(10)
    subscriber.disconnect()
    subscriber.loop_stop()

    publisher = _session_client("publisher")
    set_login(publisher, port)
    publisher.connect(host, port)
    publisher.loop_start()
    info = publisher.publish(topic, b"queued-while-offline", qos=1)
    info.wait_for_publish(10)
    assert info.is_published()
    publisher.disconnect()
    publisher.loop_stop()

    local.mosquitto.stop()  # SIGTERM: Mosquitto saves its database
    local.mosquitto.start()

    received: list[bytes] = []
    got = threading.Event()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        received.append(bytes(msg.payload))
        got.set()

    again = _session_client("persistent-sub")
    again.on_message = on_message
    _connect(again, host, port)  # no new subscribe: the session remembers it
    again.loop_start()
    try:
        assert got.wait(15), "the queued message did not survive the restart"
    finally:
        again.disconnect()
        again.loop_stop()
    assert received == [b"queued-while-offline"]


def _cli(
    args: list[str], timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stack.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def _http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def _command_round_trip(mqtt_port: int, bootstrap: str) -> str:
    """A command sent with `CommandClient` to a paho device; returns its id once it succeeded."""
    device = Device(unique("stack-dev"), "127.0.0.1", mqtt_port).connect()
    client = CommandClient(bootstrap)
    records = Records(bootstrap, ["iot.command-status", "iot.command-replies"])
    try:
        cid = client.send(device.device_id, "add", {"a": 20, "b": 22}, timeout_ms=5000)

        def finals() -> list[StatusRecord]:
            return [s for s in records.statuses("iot.command-status", cid) if s.final]

        def replies() -> list[dict[str, object]]:
            return [r for r in records.values("iot.command-replies") if r.get("command_id") == cid]

        records.wait(lambda: bool(finals()) and bool(replies()), 30, f"{cid} answered")
        assert [s.state for s in finals()] == [State.SUCCEEDED]
        [reply] = replies()
        assert reply["result"] == {"sum": 42, "by": device.device_id}
        return cid
    finally:
        device.disconnect()
        client.close()
        records.close()


def test_cli_up_down_up_keeps_data(tmp_path: Path) -> None:
    mqtt, kafka, controller, bridge_http, commands_http, api_http = free_ports(6)
    ports = [
        "--data-dir", str(tmp_path / "var"),
        "--mqtt-port", str(mqtt),
        "--kafka-port", str(kafka),
        "--kafka-controller-port", str(controller),
        "--bridge-http-port", str(bridge_http),
        "--commands-http-port", str(commands_http),
        "--api-port", str(api_http),
    ]  # fmt: skip
    # anonymous (explicitly): this test publishes with a bare mosquitto_pub; the default, with
    # authentication, is tests/stack/test_stack_auth_integration.py
    up = _cli(["up", *ports, "--commands-mode", "separate", "--insecure-anonymous"])
    try:
        assert up.returncode == 0, up.stderr
        assert "WARNING: INSECURE" in up.stderr  # loudly logged at every up and in status
        bootstrap = next(
            line.split()[1] for line in up.stdout.splitlines() if line.startswith("kafka")
        )
        status = _cli(["status", *ports])
        assert status.returncode == 0, status.stdout
        assert "WARNING" in status.stderr
        pids_before = sorted(
            line.split("pid ")[1].split(")")[0] for line in status.stdout.splitlines()
        )

        again = _cli(
            ["up", *ports, "--commands-mode", "separate", "--insecure-anonymous"]
        )  # a second `up` starts no second copy
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr
        status2 = _cli(["status", *ports])
        assert (
            sorted(line.split("pid ")[1].split(")")[0] for line in status2.stdout.splitlines())
            == pids_before
        )

        # the bridge `up` started carries a device's message into iot.telemetry, keyed by device
        mqtt_port = str(mqtt)
        payload = '{"ts": 1700000000000, "seq": 0, "metrics": {"temp": 21.5}}'
        subprocess.run(
            [
                "mosquitto_pub",
                "-p",
                mqtt_port,
                "-q",
                "1",
                "-t",
                "devices/d1/telemetry",
                "-m",
                payload,
            ],
            check=True,
            timeout=30,
        )
        records = _consume_all(bootstrap, "iot.telemetry", 1)
        assert [(key, json.loads(value)) for key, value in records] == [
            (b"d1", json.loads(payload))
        ]

        # the command path runs as its own process `commands`, the bridge without it
        commands_url = f"http://127.0.0.1:{commands_http}/metrics"
        [commands_line] = [ln for ln in status.stdout.splitlines() if ln.startswith("commands")]
        assert "running (pid" in commands_line
        assert commands_line.endswith(commands_url)
        stack_json = json.loads((tmp_path / "var" / "stack.json").read_text())
        assert stack_json["commands"] == commands_url
        _command_round_trip(mqtt, bootstrap)
        commands_metrics = _samples(_http_get(commands_url))
        assert commands_metrics["iot_commands_up"] == 1
        assert commands_metrics["iot_commands_replies_total"] == 1
        bridge_metrics = _samples(_http_get(f"http://127.0.0.1:{bridge_http}/metrics"))
        assert "iot_bridge_acked_total" in bridge_metrics
        assert not any(name.startswith("iot_commands_") for name in bridge_metrics)

        down = _cli(["down", *ports])
        assert down.returncode == 0, down.stderr
        assert "stopping commands" in down.stderr
        after = _cli(["status", *ports])
        assert after.returncode == 1  # nothing runs now
        assert [ln.split()[:2] for ln in after.stdout.splitlines()] == [
            ["mosquitto", "stopped"],
            ["kafka", "stopped"],
            ["bridge", "stopped"],
            ["commands", "stopped"],
            ["api", "stopped"],
        ]

        up2 = _cli(["up", *ports, "--commands-mode", "separate", "--insecure-anonymous"])
        assert up2.returncode == 0, up2.stderr
        again_records = _consume_all(bootstrap, "iot.telemetry", 1)
        assert again_records == records  # the record written before `down` is still there
    finally:
        _cli(["down", *ports])


def test_taken_kafka_port_fails_fast_with_log_tail(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        args = [
            "--data-dir", str(tmp_path / "var"),
            "--mqtt-port", str(free_port()),
            "--kafka-port", str(taken),
            "--kafka-controller-port", str(free_port()),
        ]  # fmt: skip
        # "fast": on the server's exit, not at the start timeout (set far beyond any load's
        # start-up time, so a run that waited for it would show; no wall-clock bound here)
        started = time.monotonic()
        result = _cli(["up", *args], env={**os.environ, "IOT_START_TIMEOUT": "170"})
        elapsed = time.monotonic() - started
        status = _cli(["status", *args])
    assert result.returncode == 1
    assert "kafka exited" in result.stderr
    assert "Last lines of" in result.stderr
    assert "Address already in use" in result.stderr
    assert "was not ready" not in result.stderr
    assert elapsed < 170
    assert "running" not in status.stdout.replace("stopped", "")  # mosquitto was stopped too
