"""The local stack: the same services docker-compose runs, as processes on one machine."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from bridge.stack.config import StackConfig
from bridge.stack.errors import StackError
from bridge.stack.kafka_server import KafkaServer
from bridge.stack.mosquitto_server import MosquittoServer
from bridge.stack.ports import port_open
from bridge.stack.topics import DESIGN_TOPICS, ensure_topics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    endpoint: str
    reachable: bool

    @property
    def running(self) -> bool:
        return self.pid is not None


class Stack:
    """Mosquitto + Kafka (+ the appliance's own processes) under one data dir."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.mosquitto = MosquittoServer(config)
        self.kafka = KafkaServer(config)

    @property
    def mqtt_host(self) -> str:
        return self.config.connect_host

    @property
    def mqtt_port(self) -> int:
        return self.config.mqtt_port

    @property
    def kafka_bootstrap(self) -> str:
        return self.config.kafka_bootstrap

    def up(self, progress: Callable[[str], None] = log.info) -> list[str]:
        """Start what is not running yet; returns the names started. All or nothing."""
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        started: list[str] = []
        steps: list[tuple[str, Callable[[], bool], Callable[[], None], Callable[[], object]]] = [
            ("mosquitto", self.mosquitto.running, self.mosquitto.start, self.mosquitto.stop),
            ("kafka", self.kafka.running, self.kafka.start, self.kafka.stop),
        ]
        try:
            for name, running, start, _stop in steps:
                if running():
                    progress(f"{name} already running")
                    continue
                progress(f"starting {name} ...")
                start()
                started.append(name)
                progress(f"{name} ready")
            created = ensure_topics(
                self.config.kafka_bootstrap, DESIGN_TOPICS, self.config.partitions
            )
            if created:
                progress(f"created topics: {', '.join(created)}")
        except (StackError, OSError) as exc:
            # Leave nothing half-started behind: stop what this call started, newest first.
            for name, _running, _start, stop in reversed(steps):
                if name in started:
                    stop()
            if isinstance(exc, StackError):
                raise
            raise StackError(str(exc)) from exc
        self._write_endpoints()
        return started

    def down(self, progress: Callable[[str], None] = log.info) -> list[str]:
        """Stop everything, newest first; returns the names that were running."""
        stopped: list[str] = []
        for name, stop in (("kafka", self.kafka.stop), ("mosquitto", self.mosquitto.stop)):
            progress(f"stopping {name} ...")
            if stop():
                stopped.append(name)
        return stopped

    def status(self) -> list[ServiceStatus]:
        host = self.config.connect_host
        return [
            ServiceStatus(
                "mosquitto",
                self.mosquitto.process.pid(),
                self.config.mqtt_url,
                port_open(host, self.config.mqtt_port),
            ),
            ServiceStatus(
                "kafka",
                self.kafka.process.pid(),
                self.config.kafka_bootstrap,
                port_open(host, self.config.kafka_port),
            ),
        ]

    def endpoints(self) -> dict[str, str]:
        return {
            "mqtt": self.config.mqtt_url,
            "kafka": self.config.kafka_bootstrap,
            "data_dir": str(self.config.data_dir),
            "logs": str(self.config.log_dir),
        }

    def _write_endpoints(self) -> None:
        path = self.config.data_dir / "stack.json"
        path.write_text(json.dumps(self.endpoints(), indent=2) + "\n")
