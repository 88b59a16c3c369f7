"""pytest plugin: run ``iot-bridge`` as a real subprocess (fixture ``bridge_factory``).

``bridge_factory(mqtt_host=None, mqtt_port=None, kafka_bootstrap=None, *, wait_ready=True,
**settings) -> BridgeProcess`` starts ``python -m bridge.cli`` (with ``commands_enabled``:
``python -m commands.inline``, ``iot-bridge`` with the command path inline) with the given
endpoints (default: the session ``stack`` fixture) and settings (``CommandConfig`` field names,
passed as ``IOT_*`` environment variables), waits for ``/readyz`` and returns a handle. Each
bridge gets a unique MQTT client id unless ``mqtt_client_id`` is given; at teardown every bridge
is stopped and its persistent MQTT session is removed from Mosquitto (so it does not queue
later tests' traffic). Unless ``mqtt_username`` is given, a bridge logs in with the test login of
the fixture Mosquitto it is pointed at (tests/plugins/mqtt_logins.py).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.plugins.jvm_options import environ_without_settings
from tests.plugins.mqtt_logins import bridge_login_settings

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0


class BridgeProcessError(RuntimeError):
    """The bridge subprocess did not start or behave as expected."""


class BridgeProcess:
    """A running (or stopped) ``iot-bridge`` subprocess."""

    def __init__(self, settings: dict[str, Any], log_path: Path) -> None:
        self.settings = dict(settings)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.http_port: int | None = None
        self.starts = 0

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    @property
    def module(self) -> str:
        """What runs: ``iot-bridge``'s module (``commands.inline``) when the command path runs
        inline, else the telemetry bridge alone (``bridge.cli``), which ``iot-bridge`` then is."""
        return "commands.inline" if self.settings.get("commands_enabled") else "bridge.cli"

    def env(self) -> dict[str, str]:
        env = environ_without_settings()
        for name, value in self.settings.items():
            text = ("1" if value else "0") if isinstance(value, bool) else str(value)
            env["IOT_" + name.upper()] = text
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, *, wait_ready: bool = True, timeout: float = READY_TIMEOUT_S) -> BridgeProcess:
        if self.running:
            raise BridgeProcessError("bridge already running")
        self.starts += 1
        self.http_port = None
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module],
                cwd=ROOT,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def log_lines(self, *, all_runs: bool = False) -> list[dict[str, Any]]:
        """The bridge's JSON log lines (of the current run unless ``all_runs``)."""
        if not self.log_path.exists():
            return []
        with self.log_path.open("rb") as f:
            if not all_runs:
                f.seek(self._log_offset)
            raw = f.read()
        out = []
        for line in raw.splitlines():
            if line.startswith(b"{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    out.append(orjson.loads(line))
        return out

    def log_text(self, tail: int = 4000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_bytes()[-tail:].decode("utf-8", "replace")

    def _find_http_port(self) -> int | None:
        for doc in self.log_lines():
            if doc.get("event") == "http_listening":
                return int(doc["http_port"])
        return None

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait for ``/readyz`` to answer 200 (raises with the log tail otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise BridgeProcessError(
                    f"bridge exited with {self.returncode} before ready:\n{self.log_text()}"
                )
            if self.http_port is None:
                self.http_port = self._find_http_port()
            if self.http_port is not None and self.http_get("/readyz")[0] == 200:
                return
            time.sleep(0.05)
        raise BridgeProcessError(f"bridge not ready within {timeout} s:\n{self.log_text()}")

    def http_get(self, path: str) -> tuple[int, str]:
        if self.http_port is None:
            self.http_port = self._find_http_port()
            if self.http_port is None:
                return 0, ""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.http_port}{path}", timeout=5
            ) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError:
            return 0, ""

    def metrics(self) -> dict[str, float]:
        """Current Prometheus samples: ``{'name{label="v",...}': value}`` (no labels: name)."""
        code, text = self.http_get("/metrics")
        if code != 200:
            raise BridgeProcessError(f"/metrics answered {code}")
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value (0.0 if absent)."""
        key = name
        if labels:
            key += "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
        return self.metrics().get(key, 0.0)

    def wait_exit(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise BridgeProcessError(
                f"bridge did not exit within {timeout} s:\n{self.log_text()}"
            ) from exc

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            raise BridgeProcessError("bridge never started")
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self) -> int:
        """SIGKILL and wait; returns the exit code (-9)."""
        if self.proc is None:
            raise BridgeProcessError("bridge never started")
        if self.running:
            self.proc.kill()
        return self.proc.wait(30)

    def restart(
        self, *, wait_ready: bool = True, timeout: float = READY_TIMEOUT_S
    ) -> BridgeProcess:
        """Stop (SIGTERM) if running, then start again with the same settings and client id."""
        if self.running:
            self.stop()
        return self.start(wait_ready=wait_ready, timeout=timeout)

    def forget_session(self) -> None:
        """Remove this bridge's persistent session from Mosquitto (clean start, expiry 0)."""
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=str(self.settings["mqtt_client_id"]),
            protocol=mqtt.MQTTv5,
        )
        username = self.settings.get("mqtt_username")
        if username:
            password_file = self.settings.get("mqtt_password_file")
            password = (
                Path(password_file).read_text().splitlines()[0]
                if password_file
                else str(self.settings.get("mqtt_password", ""))
            )
            client.username_pw_set(str(username), password)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 0
        with contextlib.suppress(OSError):
            client.connect(
                str(self.settings["mqtt_host"]),
                int(self.settings["mqtt_port"]),
                clean_start=True,
                properties=props,
            )
            client.loop_start()
            deadline = time.monotonic() + 5
            while not client.is_connected() and time.monotonic() < deadline:
                time.sleep(0.02)
            client.disconnect()
            client.loop_stop()


BridgeFactory = Callable[..., BridgeProcess]


@pytest.fixture
def bridge_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BridgeFactory]:
    """Start ``iot-bridge`` subprocesses; all are stopped (and their sessions removed) after."""
    made: list[BridgeProcess] = []

    def make(
        mqtt_host: str | None = None,
        mqtt_port: int | None = None,
        kafka_bootstrap: str | None = None,
        *,
        wait_ready: bool = True,
        **settings: Any,
    ) -> BridgeProcess:
        if mqtt_host is None or mqtt_port is None or kafka_bootstrap is None:
            stack = request.getfixturevalue("stack")
            mqtt_host = mqtt_host or stack.mqtt_host
            mqtt_port = mqtt_port or stack.mqtt_port
            kafka_bootstrap = kafka_bootstrap or stack.kafka_bootstrap
        values: dict[str, Any] = {
            "mqtt_client_id": f"bridge-test-{uuid.uuid4().hex[:10]}",
            "http_port": 0,
            "log_format": "json",
            "shutdown_timeout_s": 20.0,
        }
        if "mqtt_username" not in settings:
            values.update(bridge_login_settings(mqtt_port))
        values.update(settings)
        values.update(mqtt_host=mqtt_host, mqtt_port=mqtt_port, kafka_bootstrap=kafka_bootstrap)
        log_dir = tmp_path_factory.mktemp("bridge")
        proc = BridgeProcess(values, log_dir / "bridge.log")
        made.append(proc)
        return proc.start(wait_ready=wait_ready)

    yield make
    for proc in made:
        if proc.running:
            try:
                proc.stop(timeout=30)
            except BridgeProcessError:
                proc.kill()
        proc.forget_session()
