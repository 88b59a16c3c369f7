"""Host loss under load in the compose stack (issue 33 item 3): helpers of
tests/test_compose_run.py's host-loss test.

- `DeviceLoad`: devices with their own logins (auth-init's secrets), one MQTT 5 connection each,
  publishing QoS 1 telemetry with a per-device `seq` at a light rate; it keeps what Mosquitto
  acknowledged (PUBACK), which is what must never be lost.
- `Probe`: what the test asks the running stack, from inside it (Kafka is published to no host
  port: every service is its own host): `docker exec` of a short Python in the `api` container,
  logged in to Kafka as `kafka-admin` over SASL_SSL, for the brokers' ISRs and for every
  record of the load's devices in ``iot.telemetry``; the bridge's counters from its published
  /metrics.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as mqtt

TOPIC = "iot.telemetry"

# librdkafka settings of kafka-admin, read in the `api` container (its /secrets and /ca)
_ADMIN = (
    "import json, os, sys; from appconfig.kafka_security import client_security; "
    "conf = {'bootstrap.servers': os.environ['IOT_KAFKA_BOOTSTRAP'], **client_security("
    "'SASL_SSL', 'SCRAM-SHA-512', 'kafka-admin', '/secrets/kafka/kafka-admin.secret', "
    "'/ca/ca.crt')}; "
)

# {node id: partitions of iot.telemetry whose ISR lacks it} and the brokers in the metadata
_ISR = _ADMIN + (
    "from confluent_kafka.admin import AdminClient; "
    f"md = AdminClient(conf).list_topics('{TOPIC}', timeout=20); "
    f"parts = md.topics['{TOPIC}'].partitions.values(); "
    "print(json.dumps({'brokers': sorted(md.brokers), "
    "'lacking': {n: sum(n not in p.isrs for p in parts) for n in (1, 2, 3)}}))"
)

# every record of the devices named in argv[1] (comma-separated) in iot.telemetry, read from
# the beginning up to the high watermarks of the start: {device: [seq, ...]}
_RECORDS = _ADMIN + (
    "from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING; "
    "import time; devices = set(sys.argv[1].split(',')); "
    "c = Consumer({**conf, 'group.id': 'hostloss-probe', 'enable.auto.commit': False}); "
    f"parts = c.list_topics('{TOPIC}', timeout=30).topics['{TOPIC}'].partitions; "
    f"ends = {{p: c.get_watermark_offsets(TopicPartition('{TOPIC}', p), timeout=30)[1] "
    "for p in parts}; "
    f"c.assign([TopicPartition('{TOPIC}', p, OFFSET_BEGINNING) for p in ends]); "
    "seqs = {}; deadline = time.monotonic() + 120\n"
    "def left():\n"
    f"    pos = c.position([TopicPartition('{TOPIC}', p) for p in ends])\n"
    "    return [t for t in pos if t.offset < ends[t.partition] and ends[t.partition] > 0]\n"
    "while left() and time.monotonic() < deadline:\n"
    "    for m in c.consume(2000, 1.0):\n"
    "        key = (m.key() or b'').decode()\n"
    "        if m.error() is None and key in devices:\n"
    "            seqs.setdefault(key, []).append(json.loads(m.value())['seq'])\n"
    "assert not left(), 'did not reach the high watermarks'\n"
    "c.close(); print(json.dumps(seqs))"
)


@dataclass
class DeviceLoad:
    """``logins`` (device id -> secret) publishing ``rate`` msg/s each to Mosquitto at
    127.0.0.1:``port``, QoS 1, ``seq`` from 0 per device."""

    port: int
    logins: dict[str, str]
    rate: float
    sent: dict[str, list[tuple[int, mqtt.MQTTMessageInfo]]] = field(default_factory=dict)
    _clients: dict[str, mqtt.Client] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> DeviceLoad:
        for device, secret in self.logins.items():
            client = mqtt.Client(
                mqtt.CallbackAPIVersion.VERSION2, client_id=device, protocol=mqtt.MQTTv5
            )
            client.username_pw_set(device, secret)
            client.max_inflight_messages_set(100)
            client.max_queued_messages_set(0)
            client.connect("127.0.0.1", self.port)
            client.loop_start()
            self._clients[device] = client
            self.sent[device] = []
        wait_until(lambda: all(c.is_connected() for c in self._clients.values()), 60,
                   "the load's devices connected")  # fmt: skip
        self._thread = threading.Thread(target=self._publish, daemon=True)
        self._thread.start()
        return self

    def _publish(self) -> None:
        started, seq = time.monotonic(), 0
        while not self._stop.is_set():
            for device, client in self._clients.items():
                doc = {"ts": int(time.time() * 1000), "seq": seq, "metrics": {"t": 20.0 + seq % 7}}
                info = client.publish(f"devices/{device}/telemetry", json.dumps(doc), qos=1)
                with self._lock:
                    self.sent[device].append((seq, info))
            seq += 1
            ahead = seq / self.rate - (time.monotonic() - started)
            if ahead > 0:
                self._stop.wait(ahead)

    def acked(self) -> dict[str, set[int]]:
        """The seqs Mosquitto acknowledged so far, per device."""
        with self._lock:
            return {d: {s for s, i in sent if i.is_published()} for d, sent in self.sent.items()}

    def acked_count(self) -> int:
        return sum(len(s) for s in self.acked().values())

    def stop(self, timeout: float = 120.0) -> dict[str, set[int]]:
        """Stop publishing, wait for the PUBACKs of what was sent; what was acknowledged."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        with self._lock:
            infos = [i for sent in self.sent.values() for _, i in sent]
        deadline = time.monotonic() + timeout
        for info in infos:
            info.wait_for_publish(max(0.01, deadline - time.monotonic()))
        for client in self._clients.values():
            client.disconnect()
            client.loop_stop()
        return self.acked()


def wait_until(
    predicate: Callable[[], bool], timeout: float, what: str, every: float = 0.2
) -> float:
    """Poll until true; the seconds it took (fails the test after ``timeout``)."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - started


@dataclass
class Probe:
    """Questions to the stack of compose project ``project`` (a docker-py ``engine``)."""

    engine: Any
    project: str
    bridge_metrics_url: str
    last_failure: str = ""

    def container(self, service: str) -> Any:
        found = self.engine.containers.list(
            all=True,
            filters={"label": [f"com.docker.compose.project={self.project}",
                               f"com.docker.compose.service={service}"]},
        )  # fmt: skip
        assert len(found) == 1, (service, found)
        return found[0]

    def _python(self, script: str, *args: str) -> Any:
        # stdout apart from stderr: librdkafka logs there while a broker is down (a containers
        # run failed parsing "%3|...|FAIL|... Connection refused" as the answer)
        code, (out, err) = self.container("api").exec_run(
            ["python", "-c", script, *args], demux=True
        )
        text = (out or b"").decode(errors="replace")
        if code != 0 or not text.strip():
            why = text + (err or b"").decode(errors="replace")
            raise AssertionError(f"probe in api exited {code}: {why[-2000:]}")
        return json.loads(text.strip().splitlines()[-1])

    def isr(self) -> dict[str, Any]:
        """{'brokers': [...], 'lacking': {node: partitions whose ISR lacks it}} (keys as str)."""
        try:
            return dict(self._python(_ISR))
        except AssertionError:  # metadata timed out: a broker just went or came
            return {"brokers": [], "lacking": {}}

    def in_every_isr(self, node: int) -> bool:
        seen = self.isr()
        return node in seen["brokers"] and seen["lacking"].get(str(node)) == 0

    def records(self, devices: list[str]) -> dict[str, list[int]]:
        """The seqs in iot.telemetry per device; {} while a probe fails (kept in
        ``last_failure``): callers poll, and a leader whose high watermark is still catching up
        after a node rejoined answers OFFSET_NOT_AVAILABLE for a while (a containers run failed
        on it)."""
        try:
            found = self._python(_RECORDS, ",".join(devices))
        except AssertionError as exc:
            self.last_failure = str(exc)
            return {}
        return {k: list(v) for k, v in found.items()}

    def healthy(self, service: str) -> bool:
        state = self.container(service).attrs["State"]
        return bool(state["Running"]) and state.get("Health", {}).get("Status") == "healthy"

    def bridge_acked(self) -> int | None:
        """The bridge's iot_bridge_acked (PUBACKs sent after Kafka confirmed); None = down."""
        try:
            with urllib.request.urlopen(self.bridge_metrics_url, timeout=5) as answer:
                text = answer.read().decode()
        except (urllib.error.URLError, http.client.HTTPException, OSError):
            return None
        values = [line.split()[-1] for line in text.splitlines()
                  if line.startswith("iot_bridge_acked_total ")]  # fmt: skip
        return int(float(values[0])) if values else None

    def network(self) -> Any:
        return self.engine.networks.get(f"{self.project}_default")


def lost_and_duplicates(
    acked: dict[str, set[int]], records: dict[str, list[int]]
) -> tuple[int, int]:
    """(acknowledged seqs with no record, records beyond the first of their seq)."""
    lost = sum(len(seqs - set(records.get(d, []))) for d, seqs in acked.items())
    dups = sum(len(r) - len(set(r)) for r in records.values())
    return lost, dups
