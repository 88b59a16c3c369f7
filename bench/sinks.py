"""The contenders, as sinks the same publisher load is pointed at.

Each sink starts its process(es), says when it is ready, reports how many messages it has
delivered so far (for the load's window and the throughput curve) and stops.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
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

from bench import mqtt_wire
from bench.kafka_side import PROBE_DEVICE, Watermarks, create_topics
from bench.payload import PayloadMaker, telemetry_topic
from bench.subscriber import count_forever

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 90.0


class SinkError(Exception):
    """A contender did not start, get ready or stop."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sink:
    """Base: a contender behind Mosquitto."""

    name = "sink"
    uses_kafka = True

    def start(self) -> None:
        raise NotImplementedError

    def pids(self) -> list[int]:
        raise NotImplementedError

    def delivered(self) -> int:
        raise NotImplementedError

    def stop(self) -> list[str]:
        """Stop everything; returns notes (e.g. a non-zero exit)."""
        raise NotImplementedError

    def peak_rss_mb(self) -> float | None:
        return None


class CounterSink(Sink):
    """Mosquitto's one-to-one ceiling: a raw MQTT 5 subscriber that only counts."""

    uses_kafka = False

    def __init__(self, name: str, host: str, port: int, *, qos: int, latency: bool) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.qos = qos
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self._counter = ctx.Value("q", 0, lock=False)
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._lat: Any = ctx.Queue() if latency else None
        self._lat_from = ctx.Value("q", 2**62, lock=False)
        self._proc: Any = None
        self.latencies: list[int] = []
        self._rss: float | None = None

    def start(self) -> None:
        self._proc = self._ctx.Process(
            target=count_forever,
            kwargs={
                "host": self.host,
                "port": self.port,
                "topic_filter": "devices/+/telemetry",
                "qos": self.qos,
                "counter": self._counter,
                "ready": self._ready,
                "stop": self._stop,
                "latencies": self._lat,
                "latency_from_ms": self._lat_from,
            },
            daemon=True,
        )
        self._proc.start()
        if not self._ready.wait(30):
            self.stop()
            raise SinkError("counting subscriber did not subscribe in 30 s")

    def set_latency_from(self, ts_ms: int) -> None:
        """Sample latency only for messages published at or after ``ts_ms``."""
        self._lat_from.value = ts_ms

    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None else []

    def delivered(self) -> int:
        return int(self._counter.value)

    def stop(self) -> list[str]:
        if self._proc is None:
            return []
        from bench.procstat import peak_rss_mb

        self._rss = peak_rss_mb(self._proc.pid)
        self._stop.set()
        if self._lat is not None:
            with contextlib.suppress(Exception):
                self.latencies = self._lat.get(timeout=30)
        self._proc.join(timeout=10)
        notes = []
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
            notes.append("counting subscriber did not stop (killed)")
        elif self._proc.exitcode != 0:
            notes.append(f"counting subscriber FAILED (exit {self._proc.exitcode})")
        self._proc = None
        return notes

    def peak_rss_mb(self) -> float | None:
        return self._rss


class PublisherOnlySink(Sink):
    """No subscriber at all: Mosquitto takes and drops, so the rate is the publishers' own
    ceiling together with Mosquitto's ingest. "Delivered" = acknowledged by Mosquitto (QoS 1
    PUBACKs), so bytes still sitting in socket buffers do not count."""

    name = "publisher-only"
    uses_kafka = False

    def __init__(self) -> None:
        self._load: Any = None

    def attach(self, load: Any) -> None:
        self._load = load

    def start(self) -> None:
        return None

    def pids(self) -> list[int]:
        return []

    def delivered(self) -> int:
        return int(self._load.total_acked()) if self._load is not None else 0

    def stop(self) -> list[str]:
        return []


def publish_probe(host: str, port: int, seq: int) -> None:
    """One QoS 1 message from the probe device (ignored by the checks) to see the path work."""
    payload = PayloadMaker(PROBE_DEVICE, 200).make(time.time_ns() // 1_000_000, seq)
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(mqtt_wire.connect(f"bench-probe-{time.time_ns()}"))
        sock.sendall(mqtt_wire.publish(telemetry_topic(PROBE_DEVICE), payload, 1, 1))
        reader = mqtt_wire.StreamReader()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            data = sock.recv(1024)
            if not data:
                break
            if any(p.kind == mqtt_wire.PUBACK for p in reader.feed(data)):
                break
        sock.sendall(mqtt_wire.DISCONNECT)


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

    # subclasses: the commands to run, and an optional readiness check per process
    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        raise NotImplementedError

    def extra_topics(self) -> list[str]:
        return []

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
                        cwd=ROOT,
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
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.processes = processes
        self.settings = dict(settings or {})
        self._ports = [free_port() for _ in range(processes)]

    def extra_topics(self) -> list[str]:
        return [f"{self.topic}.{kind}" for kind in ("events", "dlq", "presence")]

    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        out = []
        stamp = time.time_ns()
        for i in range(self.processes):
            env = {
                "IOT_MQTT_HOST": self.mqtt_host,
                "IOT_MQTT_PORT": str(self.mqtt_port),
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
            if self.processes > 1:
                env["IOT_MQTT_SHARE_GROUP"] = f"bench{stamp}"
            env.update({"IOT_" + k.upper(): v for k, v in self.settings.items()})
            out.append(([sys.executable, "-m", "bridge.cli"], _python_env(env)))
        return out

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
            f"bench-mqb-{time.time_ns()}",
            "--kafka",
            self.bootstrap,
            "--topic",
            self.topic,
            *self.extra_args,
        ]
        # exposes mqb.src.mqtt_topic, which the route uses as the Kafka key (one partition
        # per device, like our bridge)
        return [(argv, _python_env({"MQB_SOURCE_METADATA": "true"}))]
