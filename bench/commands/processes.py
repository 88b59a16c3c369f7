"""The command benchmark's child processes: ``iot-bridge``, ``iot-cmd serve`` and ``iot-sim``,
started with their own logs, waited for until ready, stopped in bounded time."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.commands.errors import BenchError
from bench.commands.options import has_setting
from bench.commands.stack_setup import Servers
from stack.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 90.0
CMD_READY_LINE = "command path ready"
SIM_DEVICE_RATE = 0.2  # telemetry msgs/s of each iot-sim device (--responder sim)


def _http_ready(port: int) -> bool | None:
    """True: /readyz answered 200; False: answered otherwise; None: nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return int(resp.status) == 200
    except urllib.error.HTTPError:
        return False
    except (urllib.error.URLError, OSError):
        return None


def _log_tail(path: Path) -> str:
    try:
        return path.read_bytes()[-2000:].decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        if self.popen.poll() is not None:
            raise BenchError(
                f"{self.name} exited with {self.popen.returncode}:\n{_log_tail(self.log)}"
            )

    def stop(self, timeout: float = 60.0, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Ask it to end with ``sig``; killed when it has not ended within ``timeout`` s."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            return None


def spawn(name: str, argv: list[str], env: dict[str, str], log: Path) -> Proc:
    with log.open("wb") as out:
        popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    return Proc(name, popen, log)


def wait_until(proc: Proc, ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        proc.check()
        if time.monotonic() > deadline:
            raise BenchError(f"{proc.name}: {what} not within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.1)


def without_iot_env() -> dict[str, str]:
    """This environment less any ``IOT_*``: a child sees only the settings given to it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}


def start_command_path(
    mode: str, settings: dict[str, Any], workdir: Path
) -> tuple[Proc, Proc | None]:
    """``iot-bridge`` (+ ``iot-cmd serve`` when ``separate``), both ready."""
    base = without_iot_env()
    base["PYTHONUNBUFFERED"] = "1"

    def env_of(extra: Mapping[str, Any]) -> dict[str, str]:
        merged = {**settings, **extra}
        return base | {"IOT_" + k.upper(): str(v) for k, v in merged.items()}

    bridge_port = free_port()
    cmd_http = has_setting("command_http_port")
    cmd_http_port = free_port() if cmd_http else 0
    extra_http = {"command_http_port": cmd_http_port} if cmd_http else {}
    bridge = spawn(
        "iot-bridge",
        [sys.executable, "-m", "commands.inline"],
        env_of(
            {
                "http_port": bridge_port,
                "commands_enabled": "1" if mode == "inline" else "0",
                **extra_http,
            }
        ),
        workdir / "bridge.log",
    )
    cmd: Proc | None = None
    try:
        if mode == "separate":
            cmd = spawn(
                "iot-cmd serve",
                [sys.executable, "-m", "commands.cli", "serve"],
                env_of({"http_port": free_port(), "commands_enabled": "1", **extra_http}),
                workdir / "command-path.log",
            )
        wait_until(bridge, lambda: _http_ready(bridge_port) is True, "/readyz answering 200")
        if cmd is not None:
            cmd_proc = cmd
            line_seen_at: list[float] = []

            def cmd_ready() -> bool:
                if cmd_http:
                    state = _http_ready(cmd_http_port)
                    if state is True:
                        return True
                    if state is False:
                        return False
                # no HTTP endpoint (yet): the stderr line, after 5 s of no listener on the port
                if CMD_READY_LINE in cmd_proc.log.read_text(errors="replace"):
                    if not cmd_http:
                        return True
                    if not line_seen_at:
                        line_seen_at.append(time.monotonic())
                    return time.monotonic() - line_seen_at[0] > 5
                return False

            wait_until(cmd_proc, cmd_ready, "readiness")
    except BaseException:
        for p in (cmd, bridge):
            if p is not None:
                p.stop(10)
        raise
    return bridge, cmd


def start_sim(
    args: argparse.Namespace,
    servers: Servers,
    *,
    prefix: str,
    topics: Mapping[str, str],
    workdir: Path,
    total_time: float,
) -> Proc:
    """``iot-sim run`` as the answering devices.

    Each simulated device also sends telemetry, SIM_DEVICE_RATE msgs/s: a device with nothing
    left to send ends its run and disconnects, so the rate must keep one due every few seconds
    until the end (a fleet of 1,000 adds 200 msgs/s, counted in the telemetry figures).
    """
    argv = [
        sys.executable, "-m", "device_sim.cli", "run",
        "--devices", str(args.devices),
        "--rate", str(SIM_DEVICE_RATE),
        "--duration", str(int(total_time)),
        "--reply-latency-ms", "0",
        "--device-prefix", prefix,
        "--groups", "1",
        "--connect-rate", "1000",
        "--session-expiry-s", "0",
        "--no-progress",
        "--no-offsets",
        "--mqtt-host", servers.mqtt_host,
        "--mqtt-port", str(servers.mqtt_port),
        "--kafka-bootstrap", servers.bootstrap,
        "--topic-telemetry", topics["topic_telemetry"],
        "--topic-dlq", topics["topic_dlq"],
        "--runs-dir", str(workdir / "runs"),
        "--processes", str(args.sim_processes),
    ]  # fmt: skip
    return spawn("iot-sim", argv, without_iot_env(), workdir / "sim.log")
