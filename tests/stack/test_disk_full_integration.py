"""Issue 32's full-disk bound, per engine: a full data disk stops acknowledgements with a clear
error on the bridge's /metrics and in the console, and nothing acknowledged is lost when space
returns. One `iot-stack up` (console, command path) whose Kafka log dir and Mosquitto store are
small tmpfs mounts (root only: skipped otherwise), shared by the module; a few simulated
devices publish QoS 1 (`iot-sim run`, each with its own login) through each scenario, and
`iot-sim verify` counts what was acknowledged to them and is not in Kafka
(docs/operations.md, "A full disk")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.console.overview import parse_prometheus, total
from bench.chaos import check, faults
from bench.chaos import stack as chaos_stack
from bench.chaos.clients import Http, describe
from bench.chaos.run import _sim

pytestmark = pytest.mark.integration
SCENARIO_S = 60.0  # from the disk filled to every service ready again with the space back
KAFKA_BACK_S = 180.0  # Kafka's own start after the space returns (35-81 s at load 30, as
# test_faults_integration.py's KAFKA_START_S): not the bound under test
DISK_MB = {"kafka": 192, "mosquitto": 16}  # small: filling them is quick


@pytest.fixture(scope="module")
def disk_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chaos_stack.ChaosStack]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the data dirs are tmpfs mounts")
    work = tmp_path_factory.mktemp("disk-full")
    running = chaos_stack.up(work, analytics=False, disk=True, disk_mb=DISK_MB)
    try:  # down() unmounts the tmpfs mounts, whatever happened
        if set(running.mounts) != {"kafka", "mosquitto"}:
            pytest.skip(f"tmpfs mounts refused (got {sorted(running.mounts)})")
        _, waiting = check.wait_ready(running, 120)
        assert not waiting, f"not ready before any fault: {waiting}"
        yield running
    finally:
        chaos_stack.down(running)


def _bridge_metrics(
    stack: chaos_stack.ChaosStack,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = Http(f"http://127.0.0.1:{stack.ports['bridge']}").call(
        "GET", "/metrics", timeout=5
    )
    return parse_prometheus(body.decode()) if status == 200 else {}  # fmt: skip


def _console(stack: chaos_stack.ChaosStack) -> Http:
    session = Http(stack.api_url)
    name, secret = stack.operator
    login = session.call("POST", "/console/api/login", {"name": name, "secret": secret},
                         headers={"Origin": stack.api_url}, timeout=15)  # fmt: skip
    assert login[0] == 200, describe(login)
    return session


def _overview(session: Http) -> dict[str, Any]:
    """The Overview's latest sample ({} while the console does not answer)."""
    status, body = session.call("GET", "/console/api/overview", timeout=15)
    latest = json.loads(body).get("latest") if status == 200 else None
    return latest if isinstance(latest, dict) else {}


def _disk_full(session: Http) -> dict[str, float]:
    """The full stores the Overview shows: {store: free bytes}."""
    return dict((_overview(session).get("point") or {}).get("disk_full") or {})


def _wait(what: str, done: Callable[[], object], timeout: float) -> float:
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.5)
    return time.monotonic() - started


def _full(stack: chaos_stack.ChaosStack, store: str) -> float:
    return total(_bridge_metrics(stack), "iot_bridge_store_full", store=store)


class _Devices:
    """`iot-sim run` (QoS 1, own logins) for one scenario; :meth:`lost` stops and verifies."""

    def __init__(self, stack: chaos_stack.ChaosStack, runs: Path, tag: str) -> None:
        self.stack, self.runs, self.tag = stack, runs, tag
        self.sim = _sim(stack, runs, tag)

    def lost(self) -> int:
        self.sim.send_signal(2)  # SIGINT: it drains, then writes its manifest
        try:
            self.sim.wait(120)
        except subprocess.TimeoutExpired:
            self.sim.kill()
            raise
        for _ in range(3):  # Kafka just back from SIGSTOP may refuse a read at first
            # (UNKNOWN_LEADER_EPOCH while its broker registers again): verify again
            tally = check.Tally()
            check.sim_verify(self.stack, self.runs, self.tag, tally)
            if "mqtt" in tally.lost:
                break
            time.sleep(2)
        assert "mqtt" in tally.lost, f"iot-sim verify gave no count: {tally.notes}"
        print(f"{self.tag}: {tally.lost['mqtt']} lost, {tally.duplicates['mqtt']} duplicates, "
              f"{tally.notes}")  # fmt: skip
        return tally.lost["mqtt"]


def _acked(stack: chaos_stack.ChaosStack) -> float:
    return total(_bridge_metrics(stack), "iot_bridge_acked")


def test_a_full_kafka_disk_stops_acks_with_a_clear_error_and_loses_nothing(
    disk_stack: chaos_stack.ChaosStack, tmp_path: Path
) -> None:
    stack = disk_stack
    console = _console(stack)
    devices = _Devices(stack, tmp_path, f"disk-kafka-{int(time.time())}")
    try:
        first = _acked(stack)
        _wait("the devices acknowledged", lambda: _acked(stack) > first + 10, 30)
        started = time.monotonic()
        filler = faults.fill(stack, "kafka")
        try:
            _wait("iot_bridge_store_full{store=kafka}", lambda: _full(stack, "kafka") == 1, 15)
            _wait("Kafka down (it exits on a full log dir)",
                  lambda: total(_bridge_metrics(stack), "iot_bridge_kafka_reachable") == 0,
                  30)  # fmt: skip
            errors: list[str] = []

            def named() -> bool:
                latest = _overview(console)
                errors.append(str((latest.get("kafka") or {}).get("error", "")))
                full = (latest.get("point") or {}).get("disk_full") or {}
                return "kafka: disk full" in errors[-1] and "kafka" in full

            _wait("the console's Overview naming the full disk", named, 20)
            print(f"console: {errors[-1]!r}")
            # Kafka takes nothing now: the bridge acknowledges nothing (ack-after-Kafka)
            held = _acked(stack)
            time.sleep(3)  # a window to see no PUBACK in (the devices keep publishing)
            assert _acked(stack) == held, "the bridge acknowledged while Kafka's disk was full"
        finally:
            filler.unlink(missing_ok=True)  # space returns
        freed = time.monotonic()
        _wait("the bridge's gauge clear", lambda: _full(stack, "kafka") == 0, 10)
        back = _wait("Kafka back and the bridge ready",
                     lambda: not check.not_ready(stack), KAFKA_BACK_S)  # fmt: skip
        print(f"full for {freed - started:.1f} s; every service ready {back:.1f} s after")
        _wait(
            "the console clear",
            lambda: _overview(console).get("kafka") == {"up": True, "error": ""},
            30,
        )
    finally:
        lost = devices.lost()
    assert lost == 0, f"{lost} messages acknowledged to devices and not in Kafka"


def test_a_full_mosquitto_disk_is_named_and_a_crash_after_space_returns_loses_nothing(
    disk_stack: chaos_stack.ChaosStack, tmp_path: Path
) -> None:
    """Mosquitto keeps acknowledging QoS 1 with its store's disk full, but its saves fail:
    what it accepted is in memory only. Kafka is paused (SIGSTOP) meanwhile, so that Mosquitto
    holds the devices' messages (unacknowledged by the bridge) and its store outgrows what
    the full disk leaves; once space returns its next save (every 5 s) writes them, and a
    kill -9 of Mosquitto after that, Kafka still paused, loses none of them."""
    stack = disk_stack
    console = _console(stack)
    log_path = stack.data_dir / "logs" / "mosquitto.log"
    devices = _Devices(stack, tmp_path, f"disk-mosquitto-{int(time.time())}")
    kafka = stack.pid("kafka")
    assert kafka is not None
    try:
        first = _acked(stack)
        _wait("the devices acknowledged", lambda: _acked(stack) > first + 10, 30)
        os.kill(kafka, signal.SIGSTOP)  # from here Mosquitto holds what the devices send
        held = _pending(stack)
        _wait("Mosquitto holding messages", lambda: _pending(stack) > held + 100, 30)
        log_start = log_path.stat().st_size
        filler = faults.fill(stack, "mosquitto")
        try:
            _wait("iot_bridge_store_full{store=mosquitto}",
                  lambda: _full(stack, "mosquitto") == 1, 15)  # fmt: skip
            _wait("the console's Overview naming the full disk",
                  lambda: "mosquitto" in _disk_full(console), 20)  # fmt: skip
            failed = b"No space left on device"
            _wait("Mosquitto's failed save in its log",
                  lambda: failed in _log_since(log_path, log_start), 15)  # fmt: skip
        finally:
            filler.unlink(missing_ok=True)  # space returns
        freed = time.time()
        _wait("the bridge's gauge clear", lambda: _full(stack, "mosquitto") == 0, 10)
        _wait("a save after the space returned", lambda: _saved_after(stack, freed), 15)
        old = stack.pid("mosquitto")
        assert old is not None
        os.kill(old, signal.SIGKILL)  # a crash after the space returned: its store has it all
        _wait("Mosquitto restarted", lambda: stack.pid("mosquitto") not in (None, old), 30)
    finally:
        os.kill(kafka, signal.SIGCONT)
    try:
        _wait("every service ready", lambda: not check.not_ready(stack), SCENARIO_S)
    finally:
        lost = devices.lost()
    assert lost == 0, f"{lost} messages acknowledged to devices and not in Kafka"


def _pending(stack: chaos_stack.ChaosStack) -> float:
    """What the devices sent that Kafka has not confirmed: the bridge's window (Mosquitto
    holds those too, unacknowledged, and what the window's bound leaves it)."""
    return total(_bridge_metrics(stack), "iot_bridge_received", channel="telemetry") - total(
        _bridge_metrics(stack), "iot_bridge_produced", kind="telemetry"
    )


def _log_since(path: Path, offset: int) -> bytes:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read()


def _saved_after(stack: chaos_stack.ChaosStack, since: float) -> bool:
    try:
        return (stack.mounts["mosquitto"] / "mosquitto.db").stat().st_mtime > since
    except OSError:
        return False
