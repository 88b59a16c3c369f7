"""The real stack behind a real browser: `iot-stack up` (Mosquitto, Kafka, bridge, command path,
simulated devices, registry auth) on free ports, `iot-api --console` beside it, operator accounts
of every role, and headless Chromium (Debian's) driven by selenium."""

from __future__ import annotations

import http.cookiejar
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stack.ports import free_port, free_ports
from tests.api.harness import run_module
from tests.plugins.jvm_options import environ_without_settings

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@dataclass
class ConsoleStack:
    url: str
    kafka_bootstrap: str
    mqtt_port: int
    data_dir: Path
    devices: dict[str, str]  # simulated device id -> secret
    accounts: dict[str, str] = field(default_factory=dict)  # operator -> secret
    registry_args: list[str] = field(default_factory=list)
    api_args: list[str] = field(default_factory=list)  # iot-api's, less --api-port
    env: dict[str, str] = field(default_factory=dict)


def start_api(stack: ConsoleStack, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """Another `iot-api --console` on ``port`` beside the stack (stop it with stop_api)."""
    api = subprocess.Popen(
        [sys.executable, "-m", "api", "--api-port", str(port), *stack.api_args, *extra],
        env=stack.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    _wait_http(f"http://127.0.0.1:{port}/healthz", 60)
    return api


def operator_console(
    kafka_bootstrap: str, port: int, log: Path
) -> tuple[str, subprocess.Popen[bytes]]:
    """A registry on ``kafka_bootstrap`` with an operator account `ops`, and `iot-api --console`
    on ``port`` logging in against it (sampling every second, beside a bridge that is never
    up), ready: the operator's secret and the process (stop it with stop_api)."""
    env = environ_without_settings()
    reg = [sys.executable, "-m", "registry", "--kafka-bootstrap", kafka_bootstrap, "--json"]
    for args in (["init"], ["account", "create", "ops", "--role", "operator"]):
        done = subprocess.run([*reg, *args], capture_output=True, text=True, env=env,
                              timeout=120, check=True)  # fmt: skip
    secret = json.loads(done.stdout)["secret"]
    with log.open("wb") as out:  # the child keeps its own descriptor
        api = subprocess.Popen(
            [sys.executable, "-m", "api", "--registry-auth", "--api-port", str(port),
             "--kafka-bootstrap", kafka_bootstrap, "--console", "--console-sample-s", "1",
             "--console-services", "bridge=http://127.0.0.1:9"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_http(f"http://127.0.0.1:{port}/healthz", 60)
    except BaseException:
        stop_api(api)
        raise
    return secret, api


def stop_api(api: subprocess.Popen[bytes]) -> None:
    api.terminate()
    try:
        api.wait(20)
    except subprocess.TimeoutExpired:
        api.kill()


def _wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} not ready in {timeout_s} s")


@pytest.fixture(scope="package")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("chromium and chromium-driver are needed (.ci/setup installs them)")
    mqtt, kafka, controller, bridge_http, commands_http, api_port = free_ports(6)
    data_dir = (tmp_path_factory.mktemp("console") / "var").resolve()
    secrets = data_dir / "secrets"
    args = [
        "--data-dir", str(data_dir), "--mqtt-port", str(mqtt), "--kafka-port", str(kafka),
        "--mqtt-tls-port", str(free_port()),
        "--kafka-controller-port", str(controller), "--bridge-http-port", str(bridge_http),
        "--commands-http-port", str(commands_http),
    ]  # fmt: skip
    env = environ_without_settings()
    env |= {"IOT_KAFKA_HEAP": "512m", "IOT_START_TIMEOUT": "180"}
    bootstrap = f"127.0.0.1:{kafka}"
    api: subprocess.Popen[bytes] | None = None
    try:
        # --no-api: the tests run their own iot-api with the console on api_port
        run_module("stack.cli", ["up", *args, "--partitions", "3", "--devices", "3",
                           "--device-rate", "4", "--no-api"], env)  # fmt: skip
        registry = [
            "--kafka-bootstrap", bootstrap, "--mqtt-host", "127.0.0.1", "--mqtt-port", str(mqtt),
            "--admin-password-file", str(secrets / "registry-admin.secret"), "--json",
        ]  # fmt: skip
        stack = ConsoleStack(
            f"http://127.0.0.1:{api_port}", bootstrap, mqtt, data_dir,
            json.loads((secrets / "devices.json").read_text()), registry_args=registry, env=env,
        )  # fmt: skip
        run_module("registry", [*registry, "tenant", "create", "acme"], env)
        run_module("registry", [*registry, "device", "add", "--tenant", "acme", "acme-dev1"], env)
        out = run_module("registry", [*registry, "device", "add", "hostile-1"], env)
        stack.devices["hostile-1"] = json.loads(out)["secret"]  # MQTT client id = its name
        for name, role, tenant in [
            ("admin1", "admin", None), ("oper1", "operator", None), ("view1", "viewer", None),
            ("acme-admin", "tenant-admin", "acme"),
        ]:  # fmt: skip
            extra = ["--tenant", tenant] if tenant else []
            create = ["account", "create", name, "--role", role, *extra]
            out = run_module("registry", [*registry, *create], env)
            stack.accounts[name] = json.loads(out)["secret"]
        stack.api_args = [
            "--registry-auth", "--kafka-bootstrap", bootstrap, "--console",
            "--console-sample-s", "1", "--console-services",
            f"bridge=http://127.0.0.1:{bridge_http},commands=http://127.0.0.1:{commands_http}",
            "--console-mqtt-port", str(mqtt),
            "--console-admin-password-file", str(secrets / "registry-admin.secret"),
            "--console-sites-password-file", str(secrets / "bridge.secret"),
            "--console-warehouse", str(data_dir / "warehouse"),
        ]  # fmt: skip
        api = start_api(stack, api_port, data_dir / "logs" / "api.log")
        yield stack
    finally:
        if api is not None:
            stop_api(api)
        subprocess.run(
            [sys.executable, "-m", "stack.cli", "down", *args], env=env, timeout=180, check=False,
            capture_output=True,
        )  # fmt: skip


class Browser:
    """A headless Chromium page with its console log and failed requests collected."""

    def __init__(self, base: str, shots: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        options = Options()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--window-size=1280,900", "--disable-gpu"):  # fmt: skip
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        self.base = base
        self.shots = shots
        shots.mkdir(parents=True, exist_ok=True)

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def console_errors(self) -> list[str]:
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]

    def failed_requests(self) -> list[str]:
        """Responses >= 400 and requests that failed, except aborted ones (navigation ending
        the live stream)."""
        failed = []
        for entry in self.driver.get_log("performance"):
            msg: dict[str, Any] = json.loads(entry["message"])["message"]
            params = msg.get("params", {})
            if msg.get("method") == "Network.responseReceived":
                status = params["response"]["status"]
                if status >= 400:
                    failed.append(f"{status} {params['response']['url']}")
            elif (
                msg.get("method") == "Network.loadingFailed"
                and not params.get("canceled")
                and "ERR_ABORTED" not in params.get("errorText", "")
            ):
                failed.append(f"{params.get('errorText')} {params.get('requestId')}")
        return failed

    def close(self) -> None:
        self.driver.quit()


class Client:
    """A logged-in console session over plain HTTP (the pages' JSON, no browser)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def login(self, name: str, secret: str) -> None:
        body = json.dumps({"name": name, "secret": secret}).encode()
        req = urllib.request.Request(
            self.base + "/console/api/login", body, {"Content-Type": "application/json"}
        )
        with self.opener.open(req, timeout=30) as r:
            assert r.status == 200

    def get(self, path: str, timeout_s: float = 30.0) -> tuple[int, Any]:
        try:
            with self.opener.open(self.base + path, timeout=timeout_s) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")
        except OSError as exc:  # an answer slower than timeout_s is no answer
            return 0, str(exc)


@pytest.fixture
def browser(console_stack: ConsoleStack, tmp_path: Path) -> Iterator[Browser]:
    b = Browser(console_stack.url, tmp_path / "screenshots")
    try:
        yield b
    finally:
        b.close()
