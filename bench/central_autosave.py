"""Central Mosquitto under back-pressure: what a kill -9 loses, per autosave setting (issue 16).

The real stack (`iot-stack up` on free ports: Mosquitto, Kafka, the bridge, the supervisor;
anonymous MQTT so no registry is needed). Per run: Kafka is paused (SIGSTOP), so the bridge
takes what its Receive Maximum lets it hold and Mosquitto queues the rest in the bridge's
persistent session; devices publish COUNT QoS 1 messages (paho, 200 in flight each) and every
PUBACK is counted; 0.3 s after the last one Mosquitto gets SIGKILL (or SIGTERM), the supervisor
restarts it, Kafka is resumed (SIGCONT) and the distinct (device, seq) records in iot.telemetry
are counted once they stop growing. Lost = acknowledged - distinct in Kafka.
Run: ``python -m bench.central_autosave --changes 0 1000 --runs 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from paho.mqtt.enums import CallbackAPIVersion

from stack.config import StackConfig
from stack.ports import free_ports, port_open
from stack.process import ManagedProcess

TOPIC = "iot.telemetry"
IN_FLIGHT = 200


@dataclass(frozen=True)
class CentralStack:
    """An `iot-stack up` on free ports, driven through its CLI and pid files."""

    data_dir: Path
    mqtt_port: int
    kafka_port: int
    bridge_http: int
    env: dict[str, str]
    args: tuple[str, ...]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def cli(self, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stack.cli", *args, *self.args],
            capture_output=True, text=True, timeout=timeout, check=False, env=self.env,
        )  # fmt: skip

    def bridge_pending(self) -> int:
        """Messages the bridge holds unconfirmed by Kafka (its metrics), -1 if unreadable."""
        url = f"http://127.0.0.1:{self.bridge_http}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return -1
        found = re.search(r"^iot_bridge_pending_messages(?:\{[^}]*\})? (\S+)$", text, re.M)
        return int(float(found.group(1))) if found else -1

    def pid(self, name: str) -> int | None:
        run_dir = StackConfig(data_dir=self.data_dir).run_dir
        return ManagedProcess(name, run_dir, self.data_dir / "unused.log").pid()


@contextmanager
def central_stack(data_dir: Path, autosave_changes: int) -> Iterator[CentralStack]:
    """Up (bridge, no command path, no API) with the given autosave; down at the end."""
    mqtt_port, kafka, controller, bridge_http, commands_http, api_http = free_ports(6)
    args = (
        "--data-dir", str(data_dir), "--mqtt-port", str(mqtt_port), "--kafka-port", str(kafka),
        "--kafka-controller-port", str(controller), "--bridge-http-port", str(bridge_http),
        "--commands-http-port", str(commands_http), "--api-port", str(api_http),
        "--mosquitto-autosave-changes", str(autosave_changes),
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")} | {
        "IOT_KAFKA_HEAP": "512m",
        "IOT_START_TIMEOUT": "240",
        "IOT_STACK_RESTART_BACKOFF_INITIAL": "0.5",
        "IOT_STACK_INSECURE_ANONYMOUS": "1",  # bare paho devices, no registry
    }
    stack = CentralStack(data_dir, mqtt_port, kafka, bridge_http, env, args)
    up = stack.cli("up", "--partitions", "3", "--commands-mode", "off", "--no-api")
    try:
        if up.returncode != 0:
            raise RuntimeError(f"iot-stack up failed: {up.stderr[-2000:]}")
        yield stack
    finally:
        kafka_pid = stack.pid("kafka")
        if kafka_pid is not None:
            os.kill(kafka_pid, signal.SIGCONT)  # a paused Kafka cannot stop
        stack.cli("down", timeout=180)


def publish(port: int, devices: list[str], per_device: int, timeout: float) -> tuple[int, float]:
    """Each device publishes per_device QoS 1 messages at once; (PUBACKs counted, seconds)."""
    acked = [0]
    lock, done = threading.Lock(), threading.Event()
    total = len(devices) * per_device

    def on_publish(*_a: object) -> None:
        with lock:
            acked[0] += 1
            if acked[0] == total:
                done.set()

    clients = []
    for device in devices:
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=device, protocol=mqtt.MQTTv311)
        c.max_inflight_messages_set(IN_FLIGHT)
        c.max_queued_messages_set(0)
        c.on_publish = on_publish
        c.connect("127.0.0.1", port)
        c.loop_start()
        clients.append(c)
    started = time.monotonic()
    for seq in range(per_device):
        for device, c in zip(devices, clients, strict=True):
            payload = json.dumps({"ts": int(time.time() * 1000), "seq": seq, "metrics": {"x": 1}})
            c.publish(f"devices/{device}/telemetry", payload, 1)
    done.wait(timeout)
    took = time.monotonic() - started
    for c in clients:
        c.disconnect()
        c.loop_stop()
    return acked[0], took


def distinct_records(
    bootstrap: str, devices: set[str], expected: int, quiet_s: float, timeout: float
) -> int:
    """Distinct (device, seq) of these devices in iot.telemetry: all expected, or what came
    once nothing new came for quiet_s (after a first record: Kafka may still be waking up)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
         "enable.auto.commit": False}
    )  # fmt: skip
    seen: set[tuple[str, int]] = set()
    try:
        parts = consumer.list_topics(TOPIC, timeout=60).topics[TOPIC].partitions
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in parts])
        deadline, last_change = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline and len(seen) < expected:
            if seen and time.monotonic() - last_change >= quiet_s:
                break
            for msg in consumer.consume(1000, 1.0):
                key = (msg.key() or b"").decode()
                if msg.error() is not None or key not in devices:
                    continue
                before = len(seen)
                seen.add((key, int(json.loads(msg.value() or b"{}")["seq"])))
                if len(seen) != before:
                    last_change = time.monotonic()
        return len(seen)
    finally:
        consumer.close()


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def one_run(
    stack: CentralStack,
    devices: int,
    per_device: int,
    sig: signal.Signals = signal.SIGKILL,
    settle_s: float = 0.3,
) -> dict[str, float | int | str]:
    """Pause Kafka, publish, signal Mosquitto ``settle_s`` after the last PUBACK, resume, count."""
    names = [f"ca-{uuid.uuid4().hex[:8]}-{i}" for i in range(devices)]
    kafka_pid, old = stack.pid("kafka"), stack.pid("mosquitto")
    if kafka_pid is None or old is None:
        raise RuntimeError("kafka and mosquitto must run")
    os.kill(kafka_pid, signal.SIGSTOP)
    try:
        acked, took = publish(stack.mqtt_port, names, per_device, timeout=600)
        time.sleep(settle_s)
        in_bridge = stack.bridge_pending()
        os.kill(old, sig)
        _wait(lambda: stack.pid("mosquitto") not in (None, old), 60, "mosquitto restarted")
        _wait(lambda: port_open("127.0.0.1", stack.mqtt_port), 60, "mosquitto listening")
    finally:
        os.kill(kafka_pid, signal.SIGCONT)
    arrived = distinct_records(stack.bootstrap, set(names), acked, quiet_s=20, timeout=600)
    return {
        "signal": sig.name, "acked": acked, "publish_s": round(took, 2),
        "msgs_per_s": round(acked / took), "in_bridge": in_bridge, "in_kafka": arrived,
        "lost": acked - arrived,
    }  # fmt: skip


def flowing_run(stack: CentralStack, devices: int, per_device: int) -> dict[str, float | int]:
    """Kafka up, nothing killed: the publish rate and the time until all are in Kafka."""
    names = [f"cf-{uuid.uuid4().hex[:8]}-{i}" for i in range(devices)]
    started = time.monotonic()
    acked, took = publish(stack.mqtt_port, names, per_device, timeout=600)
    arrived = distinct_records(stack.bootstrap, set(names), acked, quiet_s=30, timeout=600)
    return {
        "acked": acked, "publish_s": round(took, 2), "msgs_per_s": round(acked / took),
        "in_kafka": arrived, "all_in_kafka_s": round(time.monotonic() - started, 2),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--changes", type=int, nargs="+", default=[0, 10_000, 1000, 100],
        help="--mosquitto-autosave-changes values (0 = a save every 5 s, the default)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="runs per setting (one stack)")
    parser.add_argument("--devices", type=int, default=3)
    parser.add_argument("--per-device", type=int, default=10_000)
    parser.add_argument("--signal", choices=["SIGKILL", "SIGTERM"], default="SIGKILL")
    parser.add_argument(
        "--flowing", action="store_true",
        help="Kafka up, nothing killed: only the publish rate and the time to Kafka",
    )  # fmt: skip
    args = parser.parse_args()
    for changes in args.changes:
        with (
            tempfile.TemporaryDirectory(prefix="central-autosave-") as tmp,
            central_stack(Path(tmp) / "var", changes) as stack,
        ):
            for run in range(1, args.runs + 1):
                result = (
                    flowing_run(stack, args.devices, args.per_device)
                    if args.flowing
                    else one_run(stack, args.devices, args.per_device, signal.Signals[args.signal])
                )
                print(json.dumps({"autosave_changes": changes, "run": run, **result}), flush=True)


if __name__ == "__main__":
    main()
