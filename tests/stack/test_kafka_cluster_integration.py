"""Chaos on a real 3-node KRaft cluster under device load (issue 17, item 2's required test).

Devices publish QoS 1 through one bridge while a Kafka node that is not the active controller
is killed with kill -9 and restarted, then the active controller is: every message Mosquitto
acknowledged must be in Kafka (checked by seq), in order per device, and the bridge must never
have been restarted. The produce stall of each kill is measured twice: as the worst ack latency
of an idempotent acks=all probe producer, and as the worst PUBACK latency the devices saw
through the bridge (docs/operations.md, "Kafka cluster", records the figures).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Producer
from paho.mqtt.enums import CallbackAPIVersion

from stack.kafka_health import cluster_view, quorum_status
from stack.launcher import Stack
from stack.topics import TopicSpec, ensure_topics
from tests.bridge.helpers import Record, consume, telemetry, wait_for
from tests.plugins.mqtt_logins import set_login

pytestmark = pytest.mark.integration

DEVICES = 20
RATE = 200.0  # device messages per second, all devices together
DOWN_S = 15.0  # how long a killed node stays down: past its fencing at any session timeout


class DevicePublisher:
    """Devices' QoS 1 telemetry round-robin at RATE until stopped; PUBACK latency per message."""

    def __init__(self, host: str, port: int, devices: list[str]) -> None:
        self.devices = devices
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"dev-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv5,
        )
        self.client.max_inflight_messages_set(2000)
        self.client.max_queued_messages_set(0)
        self.client.on_publish = self._acked
        self._lock = threading.Lock()
        self._sent_at: dict[int, float] = {}
        self._early: dict[int, float] = {}
        self.acks: list[tuple[float, float]] = []  # (sent, latency)
        self.sent = 0
        self.rounds = 0
        self._stop = threading.Event()
        set_login(self.client, port)
        self.client.connect(host, port)
        self.client.loop_start()
        wait_for(self.client.is_connected, 10, "the device publisher to connect")
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _acked(self, _c: Any, _u: Any, mid: int, _rc: Any, _p: Any) -> None:
        # paho calls this holding its own message lock: take ours only briefly, never publish
        now = time.monotonic()
        with self._lock:
            sent = self._sent_at.pop(mid, None)
            if sent is None:
                self._early[mid] = now  # acked before the publishing thread noted the mid
            else:
                self.acks.append((sent, now - sent))

    def start(self) -> DevicePublisher:
        self.thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        seq = 0
        while not self._stop.is_set():
            for device in self.devices:
                sent = time.monotonic()
                # not under our lock: publish() takes paho's lock, which _acked runs under
                info = self.client.publish(f"devices/{device}/telemetry", telemetry(seq), qos=1)
                with self._lock:
                    acked = self._early.pop(info.mid, None)
                    if acked is None:
                        self._sent_at[info.mid] = sent
                    else:
                        self.acks.append((sent, acked - sent))
                self.sent += 1
                ahead = self.sent / RATE - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            seq += 1
            self.rounds = seq

    def stop(self, timeout: float = 120.0) -> int:
        """Stop after the current round; wait for every PUBACK; returns rounds published."""
        self._stop.set()
        self.thread.join(30)
        wait_for(lambda: len(self.acks) == self.sent, timeout, "every device message PUBACKed")
        self.client.disconnect()
        self.client.loop_stop()
        return self.rounds

    def worst_latency(self, since: float, until: float) -> float:
        with self._lock:
            return max((lat for sent, lat in self.acks if since <= sent <= until), default=0.0)


class ProbeProducer:
    """An idempotent acks=all producer at 100 msg/s: its worst ack latency is the produce stall."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )
        self.topic = topic
        self.acks: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            sent = time.monotonic()

            def done(err: Any, _msg: Any, sent: float = sent) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.acks.append((sent, time.monotonic() - sent))

            self.producer.produce(self.topic, key=f"k{n % 60}", value=str(n), on_delivery=done)
            n += 1
            self.producer.poll(0.01)

    def start(self) -> ProbeProducer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)
        assert self.producer.flush(120) == 0, "probe messages left unacknowledged"

    def worst_latency(self, since: float, until: float) -> float:
        return max((lat for sent, lat in list(self.acks) if since <= sent <= until), default=0.0)

    def acked_since(self, since: float) -> bool:
        return any(sent >= since for sent, _ in list(self.acks))


def _no_under_replicated(bootstrap: str) -> bool:
    try:
        view = cluster_view(bootstrap, timeout=5)
    except Exception:  # noqa: BLE001 - a node still starting: ask again
        return False
    return len(view.brokers) == 3 and not view.under_replicated


@dataclass(frozen=True)
class Kill:
    what: str
    node_id: int
    killed_at: float
    back_at: float  # `Kafka Server started` again
    in_sync_at: float  # no partition under-replicated any more

    def figures(self, devices: DevicePublisher, probe: ProbeProducer) -> dict[str, float]:
        """Worst ack latencies of writes sent between the kill and the node's return (read
        once every message is acknowledged), and how long the node took to come back."""
        window = (self.killed_at - 0.5, self.back_at)
        return {
            "probe_stall_s": probe.worst_latency(*window),
            "device_puback_stall_s": devices.worst_latency(*window),
            "restart_s": self.back_at - self.killed_at - DOWN_S,
            "in_sync_after_restart_s": self.in_sync_at - self.back_at,
        }


def _kill_and_restart(local: Stack, node_id: int, probe: ProbeProducer, what: str) -> Kill:
    node = local.kafka_nodes[node_id - 1]
    killed_at = time.monotonic()
    node.kill()
    # down long enough for the controller to fence it (broker.session.timeout.ms) and more
    wait_for(lambda: time.monotonic() - killed_at >= DOWN_S, 30, "the node's downtime")
    node.start()  # waits for `Kafka Server started`
    back_at = time.monotonic()
    wait_for(lambda: _no_under_replicated(local.kafka_bootstrap), 120, "every replica in sync")
    in_sync_at = time.monotonic()
    # writes flow again: a probe message sent after the window is acknowledged
    wait_for(lambda: probe.acked_since(in_sync_at), 60, "a probe ack after the restart")
    return Kill(what, node_id, killed_at, back_at, in_sync_at)


# Two node restarts bound it: ~2-3 min where a restart takes 7-16 s (field notes A.1); 8-10 min
# were measured on the shared 2-core box at load average 40-58, where a restart took 65-104 s.
@pytest.mark.timeout(1200)
def test_kill9_a_broker_then_the_controller_loses_no_acked_message(
    local_cluster_factory: Any, bridge_factory: Any
) -> None:
    # with authentication on, as every fixture: the devices publish as svc/tests
    local = local_cluster_factory(nodes=3, partitions=6)
    bootstrap = local.kafka_bootstrap
    assert len(bootstrap.split(",")) == 3
    suffix = uuid.uuid4().hex[:8]
    topics = {
        "topic_telemetry": f"tel.{suffix}",
        "topic_events": f"ev.{suffix}",
        "topic_dlq": f"dlq.{suffix}",
        "topic_presence": f"pres.{suffix}",
    }
    probe_topic = f"probe.{suffix}"
    specs = [TopicSpec(t, compacted=k == "topic_presence") for k, t in topics.items()]
    ensure_topics(bootstrap, [*specs, TopicSpec(probe_topic)], partitions=6)

    def telemetry_partitions() -> list[Any]:
        return [
            p for p in cluster_view(bootstrap).partitions if p.topic == topics["topic_telemetry"]
        ]

    # a new topic reaches every broker's metadata a moment after it is created
    wait_for(lambda: len(telemetry_partitions()) == 6, 30, "the topic in the metadata")
    assert all(len(p.replicas) == 3 and len(p.isr) == 3 for p in telemetry_partitions())

    bridge = bridge_factory(local.mqtt_host, local.mqtt_port, bootstrap, **topics)
    bridge_pid = bridge.pid
    devices = DevicePublisher(
        local.mqtt_host, local.mqtt_port, [f"d{suffix}-{i:02d}" for i in range(DEVICES)]
    ).start()
    probe = ProbeProducer(bootstrap, probe_topic).start()
    wait_for(lambda: bridge.metric("iot_bridge_acked_total") >= 400, 60, "traffic through Kafka")

    leader = quorum_status(bootstrap, timeout=120).leader_id
    follower = next(n for n in (1, 2, 3) if n != leader)
    kills = [_kill_and_restart(local, follower, probe, "a broker, not the controller")]
    leader = quorum_status(bootstrap, timeout=120).leader_id
    kills.append(_kill_and_restart(local, leader, probe, "the active controller"))

    rounds = devices.stop()
    probe.stop()
    assert not probe.errors
    records = consume(
        bootstrap,
        [topics["topic_telemetry"]],
        until=lambda rs: _complete(rs, DEVICES, rounds),
        timeout=120,
    )
    by_device: dict[str, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_device[_key(r)].append(int(r.json()["seq"]))  # type: ignore[call-overload]
    assert sorted(by_device) == sorted(devices.devices)
    duplicates = 0
    for device, seqs in by_device.items():
        first_seen = list(dict.fromkeys(seqs))
        assert first_seen == list(range(rounds)), f"{device}: lost or out of order"
        duplicates += len(seqs) - rounds
    assert bridge.running, "the bridge died"
    assert bridge.pid == bridge_pid, "the bridge was restarted"
    print(
        f"{DEVICES * rounds} device messages acked, all in Kafka in order; duplicates "
        f"{duplicates}; probe acks {len(probe.acks)}; session timeout "
        f"{local.config.kafka_session_timeout_ms} ms"
    )
    for kill in kills:
        figures = kill.figures(devices, probe)
        print(
            f"kill -9 {kill.what} (node {kill.node_id}): "
            + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
        )
        # acks=all waited for the dead node until it was fenced, then went on with 2 in sync
        assert figures["probe_stall_s"] < DOWN_S + 30


def _complete(records: list[Record], devices: int, rounds: int) -> bool:
    seqs: dict[str, set[int]] = defaultdict(set)
    for r in records:
        seqs[_key(r)].add(int(r.json()["seq"]))  # type: ignore[call-overload]
    return len(seqs) == devices and all(len(s) == rounds for s in seqs.values())


def _key(record: Record) -> str:
    assert record.key is not None
    return record.key.decode()
