"""`iot-stack up` starts iot-api, supervised, with registry auth (issue 14 item 1, issue 15).

The real CLI on free ports: iot-api answers /healthz, refuses a publish without credentials,
takes one with an `api` account's Basic credentials only once Kafka holds it, serves the console
(`--console`), is restarted by the supervisor after a kill -9 and is stopped by `down`.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from stack.ports import free_port, free_ports
from tests.plugins.jvm_options import environ_without_settings
from tests.stack.stack_ports import StackPorts, running_pid

pytestmark = pytest.mark.integration


def _run(module: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=400, check=False, env=env,
    )  # fmt: skip


def _http(
    url: str, body: bytes | None = None, auth: tuple[str, str] | None = None
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST" if body else "GET")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def _api_line(args: list[str], env: dict[str, str]) -> str:
    status = _run("stack.cli", ["status", *args], env)
    [line] = [ln for ln in status.stdout.splitlines() if ln.startswith("api ")]
    return line


def _values(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        found: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(found) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                found.append(msg.value() or b"")
        return found
    finally:
        consumer.close()


def test_up_serves_iot_api_with_registry_auth_and_restarts_it(tmp_path: Path) -> None:
    ports = StackPorts.free(tmp_path)
    args = ports.args
    env = environ_without_settings()
    env |= {
        "IOT_KAFKA_HEAP": "512m",
        "IOT_START_TIMEOUT": "180",
        "IOT_STACK_RESTART_BACKOFF_INITIAL": "0.5",
    }
    url = f"http://127.0.0.1:{ports.api_http}"
    bootstrap = ports.bootstrap
    started = time.monotonic()
    try:  # `down` also after an `up` that timed out: it left the stack running
        up = _run("stack.cli", ["up", *args, "--partitions", "3", "--no-bridge", "--console"], env)
        assert up.returncode == 0, up.stderr
        print(f"up with iot-api: {time.monotonic() - started:.1f} s")
        assert f"api        {url}" in up.stdout
        line = _api_line(args, env)
        assert "running (pid" in line, line
        assert "restarts 0" in line, line
        assert line.endswith(url), line
        assert _http(f"{url}/healthz") == (200, b'{"status":"ok"}')
        assert _http(f"{url}/console/")[0] == 200  # the console's page (login in the browser)

        registry = [
            "--kafka-bootstrap", bootstrap,
            "--mqtt-host", "127.0.0.1", "--mqtt-port", str(ports.mqtt),
            "--admin-password-file", str(ports.data_dir / "secrets" / "registry-admin.secret"),
            "--json",
        ]  # fmt: skip
        made = _run("registry", [*registry, "account", "create", "pub1", "--role", "api"], env)
        assert made.returncode == 0, made.stderr
        creds = ("pub1", json.loads(made.stdout)["secret"])

        topic = f"t.api.{uuid.uuid4().hex[:8]}"
        body = json.dumps([{"n": 1}, {"n": 2}]).encode()
        assert _http(f"{url}/events/{topic}", body)[0] == 401
        assert _http(f"{url}/events/{topic}", body, ("pub1", "wrong"))[0] == 401
        # the new account counts from the moment `account create` returned (issue 37)
        answers = [_http(f"{url}/events/{topic}", body, creds)]
        assert answers[-1][0] == 200, answers
        assert json.loads(answers[-1][1])["count"] == 2
        values = sorted(json.loads(v)["n"] for v in _values(bootstrap, topic, 2))
        assert values == [1, 2]

        # kill -9: the supervisor starts a new one, which serves again
        old = running_pid(line)
        assert old is not None
        os.kill(old, signal.SIGKILL)
        back = _wait(
            lambda: running_pid(_api_line(args, env)) not in (None, old), 60, "api restarted"
        )
        assert "restarts 1 (last: killed by SIGKILL)" in _api_line(args, env)
        ready = _wait(lambda: _http(f"{url}/readyz")[0] == 200, 120, "api ready again")
        print(f"api back in {back:.1f} s, ready {ready:.1f} s later")
        again = _http(f"{url}/events/{topic}", json.dumps([{"n": 3}]).encode(), creds)
        assert again[0] == 200, again
        assert len(_values(bootstrap, topic, 3)) == 3

        down = _run("stack.cli", ["down", *args], env)
        assert down.returncode == 0, down.stderr
        assert "stopping api" in down.stderr
        assert _api_line(args, env).split()[:2] == ["api", "stopped"]
        assert _http(f"{url}/healthz")[0] == 0  # nothing listens any more
    finally:
        _run("stack.cli", ["down", *args], env)


def test_an_anonymous_stack_runs_an_anonymous_iot_api(tmp_path: Path) -> None:
    mqtt, kafka, controller, api_http = free_ports(4)
    args = [
        "--data-dir", str((tmp_path / "var").resolve()),
        "--mqtt-port", str(mqtt),
        "--mqtt-tls-port", str(free_port()),
        "--kafka-port", str(kafka),
        "--kafka-controller-port", str(controller),
        "--api-port", str(api_http),
    ]  # fmt: skip
    env = environ_without_settings()
    env |= {"IOT_KAFKA_HEAP": "512m", "IOT_START_TIMEOUT": "180"}
    try:  # `down` also after an `up` that timed out: it left the stack running
        up = _run(
            "stack.cli",
            ["up", *args, "--partitions", "1", "--no-bridge", "--insecure-anonymous"],
            env,
        )
        assert up.returncode == 0, up.stderr
        url = f"http://127.0.0.1:{api_http}"
        status, answer = _http(f"{url}/events/t.anon", b'[{"x": 1}]')
        assert status == 200, answer
        assert [json.loads(v) for v in _values(f"127.0.0.1:{kafka}", "t.anon", 1)] == [{"x": 1}]
    finally:
        _run("stack.cli", ["down", *args], env)
