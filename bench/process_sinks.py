"""The contenders that run as subprocesses: our bridge, the naive bridge, mq-bridge, Telegraf.

Each writes to a fresh Kafka topic; "delivered" is what reached it. A sink is ready once every
process says so and a probe message (from the probe device, which the checks ignore) came out
in Kafka.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import mqtt_codec as codec
from bench.kafka_side import PROBE_DEVICE, Watermarks, create_topics
from bench.payload import PayloadMaker, telemetry_topic
from bench.sinks import Sink, SinkError
from stack.ports import free_ports

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 90.0


def publish_probe(host: str, port: int, seq: int) -> None:
    """One QoS 1 message from the probe device (ignored by the checks) to see the path work."""
    payload = PayloadMaker(PROBE_DEVICE, 200).make(time.time_ns() // 1_000_000, seq)
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(
            codec.encode_connect(
                f"bench-probe-{time.time_ns()}",
                keepalive=60,
                clean_start=True,
                protocol_level=codec.MQTT_3_1_1,
            )
        )
        # an MQTT 3.1.1 PUBLISH: no property block
        sock.sendall(
            codec.encode_publish(telemetry_topic(PROBE_DEVICE), payload, 1, 1, properties=b"")
        )
        _await_packet(sock, codec.PUBACK)
        sock.sendall(codec.DISCONNECT_NORMAL)


def _await_packet(sock: socket.socket, kind: int, seconds: float = 5.0) -> bool:
    """Read the broker's packets until one of ``kind`` (True), the connection's end or
    ``seconds`` (False)."""
    reader = codec.StreamReader()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        data = sock.recv(1024)
        if not data:
            return False
        if any(p.kind == kind for p in reader.feed(data)):
            return True
    return False


def discard_session(host: str, port: int, client_id: str) -> bool:
    """End ``client_id``'s persistent session: a CONNECT with clean session set discards it (MQTT
    3.1.1, 3.1.2.4), and the DISCONNECT ends the clean one. Without this, a stopped peer's
    session stays subscribed and Mosquitto queues every later run's messages for it (up to
    max_queued_bytes), which slows each later run (measured: publisher-only 69,596 -> 12,601
    msgs/s over three rounds, Mosquitto at 2.7 GB). True once the broker accepted the CONNECT."""
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(
            codec.encode_connect(
                client_id, keepalive=60, clean_start=True, protocol_level=codec.MQTT_3_1_1
            )
        )
        accepted = _await_packet(sock, codec.CONNACK)
        sock.sendall(codec.DISCONNECT_NORMAL)
    return accepted


class ProcessSink(Sink):
    """A bridge run as subprocess(es) writing to a fresh Kafka topic."""

    def __init__(
        self,
        *,
        name: str,
        mqtt_host: str,
        mqtt_port: int,
        bootstrap: str,
        topic: str,
        partitions: int,
        log_dir: Path,
    ) -> None:
        self.name = name
        self.mqtt_host = mqtt_host
        self.mqtt_port = mqtt_port
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.log_dir = log_dir
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        self._wm: Watermarks | None = None
        self._base = 0
        self._rss: dict[int, float] = {}
        # client ids of persistent MQTT sessions a subclass's processes open (discarded on stop)
        self.session_ids: list[str] = []

    # subclasses: the commands to run, and an optional readiness check per process
    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        raise NotImplementedError

    def extra_topics(self) -> list[str]:
        return []

    def cwd(self) -> Path:
        return ROOT

    def process_ready(self, _index: int) -> bool:
        return True

    def start(self) -> None:
        create_topics(self.bootstrap, [self.topic, *self.extra_topics()], self.partitions)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i, (argv, env) in enumerate(self.commands()):
            log_path = self.log_dir / f"{self.name}-{self.topic}-{i}.log"
            self._logs.append(log_path)
            with log_path.open("wb") as log:
                self._procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=self.cwd(),
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        deadline = time.monotonic() + READY_TIMEOUT_S
        for i, proc in enumerate(self._procs):
            while not self.process_ready(i):
                self._check_alive(proc, i)
                if time.monotonic() > deadline:
                    self.stop()
                    raise SinkError(f"{self.name} not ready in {READY_TIMEOUT_S} s")
                time.sleep(0.1)
        # end-to-end readiness: a probe message must come out in Kafka
        self._wm = Watermarks(self.bootstrap, self.topic, self.partitions)
        seq = 0
        while self._wm.count() == 0:
            for i, proc in enumerate(self._procs):
                self._check_alive(proc, i)
            if time.monotonic() > deadline:
                self.stop()
                raise SinkError(f"{self.name}: probe message never reached Kafka")
            publish_probe(self.mqtt_host, self.mqtt_port, seq)
            seq += 1
            probe_deadline = time.monotonic() + 2
            while self._wm.count() == 0 and time.monotonic() < probe_deadline:
                time.sleep(0.05)
        self._base = self._wm.count()

    def _check_alive(self, proc: subprocess.Popen[bytes], i: int) -> None:
        if proc.poll() is not None:
            tail = self._logs[i].read_bytes()[-2000:].decode("utf-8", "replace")
            self.stop()
            raise SinkError(f"{self.name} exited with {proc.returncode}:\n{tail}")

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def delivered(self) -> int:
        assert self._wm is not None
        return self._wm.count() - self._base

    def stop(self) -> list[str]:
        from bench.procstat import peak_rss_mb

        notes: list[str] = []
        for p in self._procs:
            rss = peak_rss_mb(p.pid)
            if rss is not None:
                self._rss[p.pid] = rss
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for i, p in enumerate(self._procs):
            try:
                code = p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                code = p.wait(10)
                notes.append(f"process {i} did not stop on SIGTERM within 60 s (killed)")
            if code not in (0, -signal.SIGTERM):
                notes.append(f"process {i} exited with {code}")
        notes.extend(
            f"session {client_id} not discarded"
            for client_id in self.session_ids
            if not discard_session(self.mqtt_host, self.mqtt_port, client_id)
        )
        self.session_ids = []
        if self._wm is not None:
            self._wm.close()
            self._wm = None
        self._procs = []
        return notes

    def peak_rss_mb(self) -> float | None:
        return max(self._rss.values()) if self._rss else None


def _python_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class OurBridgeSink(ProcessSink):
    """``iot-bridge`` (this project), one or more processes on one shared subscription."""

    def __init__(
        self,
        *args: Any,
        processes: int = 1,
        settings: dict[str, str] | None = None,
        root: Path | None = None,
        shard_ports: list[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # MQTT shards (`--mqtt-shards N`): process i reads shard i mod N on its own port, as
        # `iot-stack up` runs one bridge per shard; processes beyond N share a shard's subscription
        self.shard_ports = list(shard_ports or [])
        self.processes = processes
        self.settings = dict(settings or {})
        # another checkout of the project (A/B runs of two versions of the bridge)
        self.root = root
        self._ports = free_ports(processes)  # distinct: chosen together

    def extra_topics(self) -> list[str]:
        return [f"{self.topic}.{kind}" for kind in ("events", "dlq", "presence")]

    def cwd(self) -> Path:
        return self.root or ROOT

    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        out = []
        stamp = time.time_ns()
        ports = self.shard_ports or [self.mqtt_port]
        for i in range(self.processes):
            env = {
                "IOT_MQTT_HOST": self.mqtt_host,
                "IOT_MQTT_PORT": str(ports[i % len(ports)]),
                "IOT_MQTT_CLIENT_ID": f"bench-iot-bridge-{stamp}-{i}",
                "IOT_MQTT_SESSION_EXPIRY_S": "0",
                "IOT_KAFKA_BOOTSTRAP": self.bootstrap,
                "IOT_TOPIC_TELEMETRY": self.topic,
                "IOT_TOPIC_EVENTS": f"{self.topic}.events",
                "IOT_TOPIC_DLQ": f"{self.topic}.dlq",
                "IOT_TOPIC_PRESENCE": f"{self.topic}.presence",
                "IOT_HTTP_PORT": str(self._ports[i]),
                "IOT_LOG_FORMAT": "json",
                "IOT_LOG_LEVEL": "WARNING",
            }
            if self.processes > len(ports):
                env["IOT_MQTT_SHARE_GROUP"] = f"bench{stamp}"
            env.update({"IOT_" + k.upper(): v for k, v in self.settings.items()})
            if self.root is not None:
                env["PYTHONPATH"] = str(self.root)
            out.append(([sys.executable, "-m", "bridge.cli"], _python_env(env)))
        return out

    def metrics_url(self, index: int = 0) -> str:
        """Process ``index``'s Prometheus endpoint."""
        return f"http://127.0.0.1:{self._ports[index]}/metrics"

    def process_ready(self, index: int) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self._ports[index]}/readyz", timeout=2
            ) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False


class NaiveBridgeSink(ProcessSink):
    """``bench.naive_bridge``: paho on_message -> produce -> flush."""

    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        argv = [
            sys.executable,
            "-m",
            "bench.naive_bridge",
            "--mqtt-host",
            self.mqtt_host,
            "--mqtt-port",
            str(self.mqtt_port),
            "--client-id",
            f"bench-naive-{time.time_ns()}",
            "--kafka",
            self.bootstrap,
            "--topic",
            self.topic,
        ]
        return [(argv, _python_env({}))]


class MqBridgeSink(ProcessSink):
    """``mq-bridge`` (PyPI) as an MQTT -> Kafka route, keyed by the MQTT topic."""

    def __init__(self, *args: Any, extra_args: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra_args = list(extra_args)

    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        # the same MQTT window and Kafka producer tuning as our bridge's defaults
        from bridge.config import BridgeConfig

        ours = BridgeConfig()
        window = str(min(ours.mqtt_receive_maximum, 65535))
        client_id = f"bench-mqb-{time.time_ns()}"
        self.session_ids.append(client_id)
        argv = [
            sys.executable,
            "-m",
            "bench.mqbridge_route",
            "--max-inflight",
            window,
            "--queue-capacity",
            window,
            "--linger-ms",
            str(ours.kafka_linger_ms),
            "--kafka-batch-size",
            str(ours.kafka_batch_size),
            "--compression",
            ours.kafka_compression,
            "--mqtt-url",
            f"tcp://{self.mqtt_host}:{self.mqtt_port}",
            "--client-id",
            client_id,
            "--kafka",
            self.bootstrap,
            "--topic",
            self.topic,
            *self.extra_args,
        ]
        # exposes mqb.src.mqtt_topic, which the route uses as the Kafka key (one partition
        # per device, like our bridge)
        return [(argv, _python_env({"MQB_SOURCE_METADATA": "true"}))]


class TelegrafSink(ProcessSink):
    """Telegraf (``bench.telegraf``: built once with only its MQTT and Kafka plugins) as an
    MQTT -> Kafka route keyed by the device id in the topic."""

    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        from bench import telegraf
        from bridge.config import BridgeConfig

        ours = BridgeConfig()
        conf = self.log_dir / f"{self.name}-{self.topic}.conf"
        client_id = f"bench-telegraf-{time.time_ns()}"
        self.session_ids.append(client_id)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        conf.write_text(
            telegraf.render_config(
                mqtt_url=f"tcp://{self.mqtt_host}:{self.mqtt_port}",
                mqtt_topic=telemetry_topic("+"),
                client_id=client_id,
                bootstrap=self.bootstrap,
                topic=self.topic,
                window=min(ours.mqtt_receive_maximum, 65535),
                compression=ours.kafka_compression,
            )
        )
        try:
            binary = telegraf.ensure_binary()
        except telegraf.TelegrafUnavailableError as exc:
            raise SinkError(str(exc)) from exc
        return [([str(binary), "--config", str(conf)], _python_env({}))]
