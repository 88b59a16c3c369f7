"""The checkers of a chaos cell: what each client was acknowledged, read back from Kafka (or
from the queue's consumer), lost and duplicated; the MQTT devices' count is `iot-sim verify`'s;
every service ready again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.chaos.load import MR_TOPIC, ClientPath, Load
from bench.chaos.stack import ChaosStack
from stack.errors import StackError
from stack.kafka_health import cluster_view
from stack.ports import port_open

# iot-api's default visibility (30 s) + its clock grace (1 s) + a tick's round trip, with room
QUEUE_REDELIVERY_S = 40.0


@dataclass
class Tally:
    """Lost and duplicated messages of one cell, by client path."""

    lost: dict[str, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(
        self, name: str, acked: set[int], seen: Counter[int], unsure: frozenset[int] = frozenset()
    ) -> None:
        """``unsure``: delivered, but the receiver's ack failed (not lost; may come again)."""
        self.lost[name] = len(acked - set(seen) - unsure)
        self.duplicates[name] = sum(n - 1 for s, n in seen.items() if s in acked and n > 1)


def kafka_seqs(bootstrap: str, topic: str, tag: str, key: bytes | None = None) -> Counter[int]:
    """How often each ``seq`` of cell ``tag`` is in ``topic`` (read to its end)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    seen: Counter[int] = Counter()
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = {}
        for p in meta.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        left = {p for p, high in ends.items() if high > 0}
        deadline = time.monotonic() + 120
        while left and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            if (msg.offset() or 0) >= ends[msg.partition() or 0] - 1:
                left.discard(msg.partition() or 0)
            if key is not None and msg.key() != key:
                continue
            try:
                item = json.loads(msg.value() or b"")
            except ValueError:
                continue
            if isinstance(item, dict) and item.get("cell") == tag:
                seen[int(item["seq"])] += 1
    finally:
        consumer.close()
    return seen


def tally(stack: ChaosStack, load: Load) -> Tally:
    """MR, HTTP device and queue: acknowledged vs found (drains the queue first)."""
    out = Tally()
    p = load.paths
    out.add("mr", p["mr-publish"].acked, kafka_seqs(stack.bootstrap, MR_TOPIC, load.tag))
    device = load.device_id.encode()
    out.add("http-device", p["http-device"].acked,
            kafka_seqs(stack.bootstrap, "iot.telemetry", load.tag, device))  # fmt: skip
    idle_since = time.monotonic()
    # drain: 10 s without a message of the cell, and past the redelivery of anything a failed
    # receive or ack left in flight (CI once counted 4 such messages lost)
    back_by = load.queue_unsure_at + QUEUE_REDELIVERY_S if load.queue_unsure_at else 0.0
    while time.monotonic() - idle_since < 10 or time.monotonic() < back_by:
        if load.receive_queue(timeout_ms=2000):
            idle_since = time.monotonic()
    out.add("queue", p["queue-send"].acked, p["queue-consume"].received,
            frozenset(load.queue_unsure))  # fmt: skip
    return out


def sim_verify(stack: ChaosStack, runs_dir: Path, run_id: str, tally_: Tally) -> None:
    """`iot-sim verify`: the MQTT devices' acknowledged messages missing, and duplicates."""
    done = subprocess.run(
        [sys.executable, "-m", "device_sim.cli", "verify", run_id, "--runs-dir", str(runs_dir),
         "--kafka-bootstrap", stack.bootstrap, "--json", "-", "--workers", "1",
         "--wait-s", "30", "--max-unacked-fraction", "1"],
        capture_output=True, text=True, timeout=600, check=False, env=stack.env,
    )  # fmt: skip
    try:
        report = json.loads(done.stdout)
    except ValueError:
        tally_.notes.append(f"iot-sim verify failed: {done.stderr.strip()[-200:]}")
        return
    tally_.lost["mqtt"] = int(report.get("missing_acked", 0))
    tally_.duplicates["mqtt"] = int(report.get("duplicates", 0))
    unacked = int(report.get("missing_unacked", 0))
    if unacked:
        tally_.notes.append(f"mqtt: {unacked} never acknowledged and not in Kafka (not lost)")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310 - the stack's http://
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def not_ready(stack: ChaosStack) -> list[str]:
    """The services not running or not ready now."""
    state = stack.link.state()
    waiting = []
    expected = ["mosquitto", *stack.kafka_services, "bridge", "commands", "api", "devices"]
    if stack.analytics:
        expected.append("analytics")
    for name in expected:
        record = state.services.get(name) if state is not None else None
        if record is None or record.pid is None:
            waiting.append(name)
    if not port_open("127.0.0.1", stack.mqtt_port):
        waiting.append("mosquitto port")
    for name, port in zip(stack.kafka_services, stack.kafka_ports, strict=True):
        if not port_open("127.0.0.1", port):
            waiting.append(f"{name} port")
    waiting += [f"{n} ready" for n, url in stack.ready_urls.items() if not _http_ok(url)]
    return waiting


def wait_ready(stack: ChaosStack, timeout: float) -> tuple[float, list[str]]:
    started = time.monotonic()
    while True:
        waiting = not_ready(stack)
        if not waiting or time.monotonic() - started > timeout:
            return time.monotonic() - started, waiting
        time.sleep(0.5)


def wait_in_sync(stack: ChaosStack, timeout: float) -> float | None:
    """Seconds until the cluster reports every node and no under-replicated partition (None:
    not within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started <= timeout:
        try:
            view = cluster_view(stack.bootstrap, timeout=5)
        except StackError:  # no node answered: ask again
            view = None
        whole = view is not None and len(view.brokers) == stack.kafka_nodes
        if whole and view is not None and not view.under_replicated:
            return time.monotonic() - started
        time.sleep(1)
    return None


def worst_error(paths: dict[str, ClientPath]) -> str:
    """The client path with the longest outage, its length and its commonest error."""
    worst = max(((p.worst_outage(), name) for name, p in paths.items()), default=None)
    if worst is None or worst[0][0] == 0.0:
        return "none"
    (seconds, text), name = worst
    return f"{name}: {seconds:.0f} s of {text}"
