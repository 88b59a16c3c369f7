"""`iot-stack up --bridges 2` through the real stack (issue 17, item 4).

Simulated devices publish QoS 1; the verifier must find nothing acknowledged lost, both bridge
instances must have taken part (their own metrics), and the per-device reordering a shared
subscription causes is reported (it is the trade-off being measured, not a failure).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.stack.stack_ports import StackPorts, running_pid

pytestmark = pytest.mark.integration

DEVICES = 40
RATE = 25.0  # msgs/s per device: 1,000 msgs/s in all
DURATION_S = 15


def _cli(module: str, args: list[str], env: dict[str, str], timeout: float = 240) -> str:
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0, f"{module} {args[0]}: {result.stderr[-3000:]}"
    return result.stdout


def _ports(count: int, step_for_last: int) -> list[int]:
    """`count` ports free now, the last one also free at + `step_for_last` (bridge-2's).

    Chosen below the ephemeral range (32768-60999): on a shared machine with tens of thousands
    of client connections, a port the OS calls free there is often some connection's source
    port by the time Kafka binds it, 30 s later (measured: two failed starts in a row)."""
    rng = random.Random()
    for _ in range(200):
        wanted = rng.sample(range(20000, 32000), count)
        wanted.append(wanted[-1] + step_for_last)
        socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in wanted]
        try:
            for sock, port in zip(socks, wanted, strict=True):
                sock.bind(("127.0.0.1", port))
            return wanted[:count]
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise AssertionError("no free ports below the ephemeral range")


def _acked(port: int) -> float:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "iot_bridge_acked":
            return sum(sample.value for sample in family.samples if sample.name.endswith("_total"))
    raise AssertionError(f"no iot_bridge_acked_total at {url}")


def _status(args: list[str], env: dict[str, str]) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, "-m", "stack.cli", "status", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    return {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}


def _wait(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.5)


def _shared_run(tmp_path: Path, kill_one: bool) -> tuple[dict[str, Any], dict[str, float]]:
    """`up --bridges 2`, the simulator at QoS 1 (optionally `kill -9` of bridge-2 mid-run),
    then the verifier's report and each bridge's acknowledged count; `down` at the end."""
    # bridge-2's port (bridge_http + 10) must be free too, hence ports of its own
    mqtt, kafka, controller, commands_http, api_http, mqtt_tls, bridge_http = _ports(7, 10)
    stack = StackPorts(
        (tmp_path / "var").resolve(),
        mqtt,
        kafka,
        controller,
        bridge_http,
        commands_http,
        api_http,
        mqtt_tls,
    )
    args = stack.args
    env = dict(os.environ) | {
        "IOT_KAFKA_HEAP": "512m",
        "IOT_START_TIMEOUT": "180",
        "IOT_STACK_RESTART_BACKOFF_INITIAL": "1",
        # anonymous (explicitly): the simulated devices publish without provisioned secrets
        "IOT_STACK_INSECURE_ANONYMOUS": "1",
    }
    sim_env = env | {
        "IOT_MQTT_HOST": "127.0.0.1",
        "IOT_MQTT_PORT": str(stack.mqtt),
        "IOT_KAFKA_BOOTSTRAP": stack.bootstrap,
    }
    runs = str(tmp_path / "sim-runs")
    ports = {"bridge-1": stack.bridge_http, "bridge-2": stack.bridge_http + 10}
    try:
        _cli("stack.cli", ["up", *args, "--bridges", "2", "--commands-mode", "off", "--no-api",
                           "--partitions", "6"], env)  # fmt: skip
        status = _status(args, env)
        assert [n for n in status if n.startswith("bridge")] == ["bridge-1", "bridge-2"]
        for name, port in ports.items():
            assert "running (pid" in status[name], status[name]
            assert "restarts 0" in status[name], status[name]
            assert f":{port}/metrics" in status[name], status[name]

        sim = subprocess.Popen(
            [sys.executable, "-m", "device_sim.cli", "run", "--devices", str(DEVICES),
             "--rate", str(RATE), "--qos", "1", "--duration", str(DURATION_S),
             "--runs-dir", runs, "--no-progress", "--device-prefix", "shared"],
            env=sim_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            if kill_one:
                _wait(lambda: _acked(ports["bridge-2"]) > 100, 60, "bridge-2 taking part")
                victim = running_pid(status["bridge-2"])
                assert victim is not None
                os.kill(victim, signal.SIGKILL)
                _wait(
                    lambda: running_pid(_status(args, env)["bridge-2"]) not in (None, victim),
                    30,
                    "bridge-2 restarted by the supervisor",
                )
                line = _status(args, env)["bridge-2"]
                assert "restarts 1 (last: killed by SIGKILL)" in line, line
                assert "restarts 0" in _status(args, env)["bridge-1"]
            _, err = sim.communicate(timeout=240)
            assert sim.returncode == 0, err[-3000:]
        finally:
            if sim.poll() is None:
                sim.kill()
        verify = ["verify", "--runs-dir", runs, "--wait-s", "90", "--json", "-"]
        report = json.loads(_cli("device_sim.cli", verify, sim_env, timeout=240))
        acked = {name: _acked(port) for name, port in ports.items()}
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "stack.cli", "down", *args],
            capture_output=True, text=True, timeout=240, check=False, env=env,
        )  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert "stopping bridge-1" in down.stderr
    assert "stopping bridge-2" in down.stderr
    return report, acked


def _summary(report: dict[str, Any], acked: dict[str, float], seconds: float) -> str:
    per_device = {p["device"]: p["order_violations"] for p in report["problems"]}
    reordered_devices = sum(1 for n in per_device.values() if n)
    return (
        f"sent {report['sent']}, unique {report['unique']}, missing_acked "
        f"{report['missing_acked']}, duplicates {report['duplicates']}, reordered "
        f"{report['order_violations']} records on {reordered_devices}/{DEVICES} devices "
        f"(most on one device: {max(per_device.values(), default=0)}); acked per bridge "
        f"{acked}; {seconds:.0f} s"
    )


def test_two_bridges_share_the_load_and_lose_nothing(tmp_path: Path) -> None:
    started = time.monotonic()
    report, acked = _shared_run(tmp_path, kill_one=False)
    print("\n2 bridges: " + _summary(report, acked, time.monotonic() - started))
    assert report["sent"] >= DEVICES * RATE * DURATION_S * 0.5, report["sent"]
    assert report["missing_acked"] == 0, report["problems"][:5]
    assert report["unique"] >= report["sent"] - report["missing_unacked"]
    assert not report["devices_spanning_partitions"]
    # both took part: Mosquitto spreads a shared subscription's messages over its members
    assert all(n > 0 for n in acked.values()), acked
    assert sum(acked.values()) >= report["unique"]
    assert isinstance(report["order_violations"], int)


@pytest.mark.slow
def test_a_killed_bridge_is_restarted_alone_and_nothing_acknowledged_is_lost(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    report, acked = _shared_run(tmp_path, kill_one=True)
    print("\n2 bridges, bridge-2 killed: " + _summary(report, acked, time.monotonic() - started))
    assert report["missing_acked"] == 0, report["problems"][:5]
    assert not report["devices_spanning_partitions"]
    # the restarted instance took part again (its counters start over with the process)
    assert all(n > 0 for n in acked.values()), acked
