"""Supervision with the real servers (issue 17): `kill -9` each service `iot-stack up` started.

Each one must be back (a new pid) within its backoff, counted in `iot-stack status`, and a
device's message must flow from Mosquitto through the bridge into Kafka again afterwards; a
killed supervisor takes its services with it (SIGTERM: clean shutdowns, no orphan holding a
port) and the next `up` brings the stack back with the acknowledged data; `down` leaves no
process behind.
"""

from __future__ import annotations

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
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, Message, Producer, TopicPartition

from stack.connect_conf import SERVER_CLASS
from stack.ports import free_ports, port_open

# a zombie counts as dead: the killed supervisor's children are reaped by pid 1 whenever it likes
from stack.procfs import alive as _alive
from tests.stack.connect_client import check_endpoint
from tests.stack.stack_ports import StackPorts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BACKOFF_INITIAL_S = 1.0
# a new pid must appear within the backoff plus the supervisor's poll and a loaded machine's
# fork/exec; readiness (Kafka's log recovery, the bridge reconnecting) comes on top of that
BACK_WITHIN_S = BACKOFF_INITIAL_S + 5.0


def _cli(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stack.cli", *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip


def _status(args: list[str], env: dict[str, str]) -> dict[str, str]:
    result = _cli(["status", *args], env)
    return {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}


def _pid(line: str) -> int | None:
    return int(line.split("pid ")[1].split(")", maxsplit=1)[0]) if "running (pid" in line else None


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _flows(mqtt_port: int, bootstrap: str, timeout: float = 120) -> int:
    """Publish QoS 1 telemetry until one record reaches iot.telemetry; returns the tries."""
    device = f"sup-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics("iot.telemetry", timeout=30).topics["iot.telemetry"]
        # from the end, resolved once the partitions have leaders again (a record published
        # before that is missed: the loop publishes another)
        consumer.assign([TopicPartition("iot.telemetry", p, OFFSET_END) for p in meta.partitions])
        deadline = time.monotonic() + timeout
        tries = 0
        while time.monotonic() < deadline:
            tries += 1
            body = json.dumps({"ts": int(time.time() * 1000), "seq": tries, "metrics": {"t": 1}})
            subprocess.run(
                ["mosquitto_pub", "-p", str(mqtt_port), "-q", "1",
                 "-t", f"devices/{device}/telemetry", "-m", body],
                check=False, timeout=30, capture_output=True,
            )  # fmt: skip
            until = time.monotonic() + 15
            while time.monotonic() < until:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error() and msg.key() == device.encode():
                    return tries
        raise AssertionError(f"no message flowed end to end within {timeout:.0f} s")
    finally:
        consumer.close()


def _processes_of(data_dir: Path) -> list[str]:
    """Every process whose argv names the data dir or whose working dir is inside it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(data_dir) in argv or cwd.startswith(str(data_dir)):
            found.append(f"{entry.name}: {argv}")
    return found


def test_every_service_is_restarted_and_down_leaves_nothing(tmp_path: Path) -> None:
    ports = StackPorts.free(tmp_path)
    args = ports.args
    env = dict(os.environ) | {
        "IOT_STACK_RESTART_BACKOFF_INITIAL": str(BACKOFF_INITIAL_S),
        "IOT_STACK_RESTART_BACKOFF_MAX": "8",
        "IOT_KAFKA_HEAP": "512m",
        # anonymous (explicitly): it publishes with a bare mosquitto_pub
        "IOT_STACK_INSECURE_ANONYMOUS": "1",
    }
    bootstrap = ports.bootstrap
    ready = {
        "mosquitto": lambda: port_open("127.0.0.1", ports.mqtt),
        "kafka": lambda: port_open("127.0.0.1", ports.kafka),
        "bridge": lambda: _http_ok(f"http://127.0.0.1:{ports.bridge_http}/readyz"),
        "commands": lambda: _http_ok(f"http://127.0.0.1:{ports.commands_http}/readyz"),
    }
    try:  # `down` also after an `up` that timed out: it left the stack running
        up = _cli(["up", *args, "--commands-mode", "separate"], env)
        assert up.returncode == 0, up.stderr
        status = _status(args, env)
        assert list(status) == ["supervisor", "mosquitto", "kafka", "bridge", "commands", "api"]
        for name in ready:
            assert "restarts 0" in status[name], status[name]
        _flows(ports.mqtt, bootstrap)
        seen_pids = {name: _pid(line) for name, line in status.items()}

        for name in ("bridge", "commands", "mosquitto", "kafka"):
            old = _pid(_status(args, env)[name])
            assert old is not None
            os.kill(old, signal.SIGKILL)
            back = _wait(
                lambda n=name, o=old: _pid(_status(args, env)[n]) not in (None, o),  # type: ignore[misc]
                BACK_WITHIN_S + 10,  # `status` itself takes ~1 s per call on a loaded box
                f"{name} restarted",
            )
            line = _status(args, env)[name]
            assert "restarts 1 (last: killed by SIGKILL)" in line, line
            _wait(ready[name], 120, f"{name} ready again")
            tries = _flows(ports.mqtt, bootstrap)
            print(f"{name}: back in {back:.1f} s, message flowed after {tries} publish(es)")
            seen_pids[f"{name}-2"] = _pid(line)

        # the supervisor itself: its services die with it (SIGTERM: Kafka and Mosquitto shut
        # down cleanly), no orphan keeps a port, and the next `up` brings the stack back with
        # its data
        kept = _acknowledged_data(ports.mqtt, bootstrap)
        statuses = _status(args, env)
        sup = _pid(statuses["supervisor"])
        assert sup is not None
        services = {n: _pid(ln) for n, ln in statuses.items() if n != "supervisor"}
        os.kill(sup, signal.SIGKILL)
        gone = _wait(
            lambda: not _processes_of(ports.data_dir),
            90,  # Kafka's controlled shutdown takes a few seconds
            f"every service gone with the supervisor (left: {_processes_of(ports.data_dir)})",
        )
        listening = [p for p in ports.listeners if port_open("127.0.0.1", p)]
        assert listening == [], f"ports still held after the supervisor died: {listening}"
        assert all(not _alive(pid) for pid in services.values() if pid is not None)
        kafka_log = (ports.data_dir / "logs" / "kafka.log").read_text()
        assert "shut down completed" in kafka_log.rsplit("=== iot-stack:", 1)[1]
        mosquitto_log = (ports.data_dir / "logs" / "mosquitto.log").read_text()
        assert "terminating" in mosquitto_log.rsplit("=== iot-stack:", 1)[1]
        assert _cli(["status", *args], env).returncode == 1
        again = _cli(["up", *args, "--commands-mode", "separate"], env)
        assert again.returncode == 0, again.stderr
        after = _status(args, env)
        assert list(after) == list(statuses)
        assert _pid(after["supervisor"]) not in (None, sup)
        for name, is_ready in ready.items():
            assert "restarts 0" in after[name], after[name]
            _wait(is_ready, 120, f"{name} ready after the new up")
        _flows(ports.mqtt, bootstrap)
        _assert_kept(kept, ports.mqtt, bootstrap)
        print(f"supervisor: services gone {gone:.1f} s after its kill -9, data kept")

        victim = _pid(after["bridge"])
        assert victim is not None
        os.kill(victim, signal.SIGKILL)  # the new supervisor restarts its services
        _wait(lambda: _pid(_status(args, env)["bridge"]) not in (None, victim), 20, "restarted")
        _wait(ready["bridge"], 120, "bridge ready again")
        _flows(ports.mqtt, bootstrap)
        seen_pids["bridge-3"] = _pid(_status(args, env)["bridge"])
        log_text = (ports.data_dir / "logs" / "supervisor.log").read_text()
        assert "died after" in log_text
        assert "restarted (pid" in log_text
    finally:
        down = _cli(["down", *args], env)
    assert down.returncode == 0, down.stderr
    assert "stopping supervisor" in down.stderr
    _wait(
        lambda: not _processes_of(ports.data_dir),
        10,
        f"every process gone (left when down returned: {_processes_of(ports.data_dir)})",
    )
    for name, pid in seen_pids.items():
        assert pid is None or not _alive(pid), f"{name} (pid {pid}) still runs"


@dataclass(frozen=True)
class _Kept:
    topic: str  # a retained MQTT message on this topic, acknowledged by Mosquitto (QoS 1)
    payload: str
    partition: int  # a Kafka record, acknowledged by the broker, at this offset
    offset: int
    key: bytes


def _acknowledged_data(mqtt_port: int, bootstrap: str) -> _Kept:
    """One message each server acknowledged just now (within Mosquitto's autosave window: only a
    clean shutdown, which saves the store, keeps it)."""
    tag = uuid.uuid4().hex[:8]
    topic, payload = f"sup/kept/{tag}", f"kept-{tag}"
    subprocess.run(
        ["mosquitto_pub", "-p", str(mqtt_port), "-q", "1", "-r", "-t", topic, "-m", payload],
        check=True, timeout=30, capture_output=True,
    )  # fmt: skip
    acked: list[tuple[int, int]] = []

    def delivered(err: object, msg: Message) -> None:
        if err is None:
            acked.append((msg.partition() or 0, msg.offset() or 0))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("iot.telemetry", key=tag.encode(), value=b"{}", on_delivery=delivered)
    producer.flush(30)
    assert acked, "Kafka did not acknowledge the record"
    return _Kept(topic, payload, acked[0][0], acked[0][1], tag.encode())


def _assert_kept(kept: _Kept, mqtt_port: int, bootstrap: str) -> None:
    sub = subprocess.run(
        ["mosquitto_sub", "-p", str(mqtt_port), "-t", kept.topic, "-C", "1", "-W", "20"],
        check=False, timeout=40, capture_output=True, text=True,
    )  # fmt: skip
    assert sub.stdout.strip() == kept.payload, f"retained message lost: {sub!r}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        consumer.assign([TopicPartition("iot.telemetry", kept.partition, kept.offset)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                assert (msg.offset(), msg.key()) == (kept.offset, kept.key)
                return
        raise AssertionError("the acknowledged Kafka record was not read back")
    finally:
        consumer.close()


def _records_arrive(bootstrap: str, timeout: float = 60) -> bool:
    """Any new record in iot.telemetry (the simulated devices publish continuously)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics("iot.telemetry", timeout=30).topics["iot.telemetry"]
        consumer.assign([TopicPartition("iot.telemetry", p, OFFSET_END) for p in meta.partitions])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                return True
        return False
    finally:
        consumer.close()


def _spark_drivers(data_dir: Path) -> list[str]:
    """The analytics job's Spark drivers (the Connect server is a SparkSubmit JVM too)."""
    return [p for p in _processes_of(data_dir) if "SparkSubmit" in p and SERVER_CLASS not in p]


@pytest.mark.spark
@pytest.mark.timeout(1500)  # two Spark JVMs (the job, Spark Connect): minutes on a loaded box
def test_analytics_and_devices_are_restarted(tmp_path: Path) -> None:
    ports = StackPorts.free(tmp_path)
    analytics_http, connect_tls, connect_server = free_ports(3)
    args = ports.args
    env = dict(os.environ) | {
        "IOT_STACK_RESTART_BACKOFF_INITIAL": str(BACKOFF_INITIAL_S),
        "IOT_STACK_ANALYTICS_HTTP_PORT": str(analytics_http),
        "IOT_STACK_CONNECT_PORT": str(connect_tls),
        "IOT_STACK_CONNECT_SERVER_PORT": str(connect_server),
        "IOT_KAFKA_HEAP": "512m",
        "IOT_START_TIMEOUT": "240",
        "IOT_TABLES": "device_status",  # the one table check_endpoint reads: others add CPU
    }
    bootstrap = ports.bootstrap
    healthz = f"http://127.0.0.1:{analytics_http}/healthz"
    try:  # `down` also after an `up` that timed out: it left the stack running
        up = _cli(
            ["up", *args, "--commands-mode", "off", "--analytics", "--devices", "3",
             "--device-rate", "2"],
            env, timeout=700,  # Kafka, the job and Spark Connect: minutes each when loaded
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        status = _status(args, env)
        assert list(status) == [
            "supervisor",
            "mosquitto",
            "kafka",
            "bridge",
            "api",
            "analytics",
            "connect",
            "connect-tls",
            "devices",
        ]
        assert status["analytics"].endswith(f"http://127.0.0.1:{analytics_http}/metrics")
        assert f"sc://127.0.0.1:{connect_tls}/;use_ssl=true " in status["connect-tls"]
        assert len(_spark_drivers(ports.data_dir)) == 1
        printed = _cli(["connect-url", *args], env)  # the URL with the token, on stdout
        assert printed.returncode == 0, printed.stderr
        check_endpoint(printed.stdout.strip(), printed.stderr, ports.data_dir)

        old = _pid(status["analytics"])
        assert old is not None
        os.kill(old, signal.SIGKILL)
        back = _wait(
            lambda: _pid(_status(args, env)["analytics"]) not in (None, old),
            BACK_WITHIN_S + 10,
            "analytics restarted",
        )
        assert "restarts 1 (last: killed by SIGKILL)" in _status(args, env)["analytics"]
        ready = _wait(lambda: _http_ok(healthz), 240, "analytics /healthz again")
        # the killed job's Spark JVM went with it: one driver, the new one
        assert len(_spark_drivers(ports.data_dir)) == 1, _spark_drivers(ports.data_dir)

        old = _pid(_status(args, env)["devices"])
        assert old is not None
        os.kill(old, signal.SIGKILL)
        _wait(
            lambda: _pid(_status(args, env)["devices"]) not in (None, old),
            BACK_WITHIN_S + 10,
            "devices restarted",
        )
        assert _records_arrive(bootstrap), "no telemetry from the restarted devices"
        print(f"analytics: back in {back:.1f} s, /healthz 200 {ready:.0f} s later")
    finally:
        down = _cli(["down", *args], env)
    assert down.returncode == 0, down.stderr
    _wait(
        lambda: not _processes_of(ports.data_dir),
        20,
        f"every process gone (left when down returned: {_processes_of(ports.data_dir)})",
    )
