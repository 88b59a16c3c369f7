"""Where a fleet connects and how it runs (not what it sends: that is :mod:`device_sim.spec`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the fleet connects and where the verifier reads (env names as the bridge's)."""

    mqtt_host: str = "localhost"
    mqtt_port: int = 1883
    mqtt_username: str = ""
    mqtt_password: str = ""
    kafka_bootstrap: str = "localhost:9092"
    topic_telemetry: str = "iot.telemetry"
    topic_dlq: str = "iot.dlq"
    topic_events: str = "iot.events"
    # device id -> its own secret (user name = device id); wins over mqtt_username/password
    credentials: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("mqtt_password")
        out["credentials"] = len(out.pop("credentials"))  # how many, never the secrets
        return out

    def auth_for(self, device_id: str) -> tuple[str, str | None] | None:
        """(user name, password) device ``device_id`` connects with; None = anonymous."""
        if self.credentials:
            return device_id, self.credentials[device_id]
        if self.mqtt_username:
            return self.mqtt_username, self.mqtt_password or None
        return None


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How the fleet runs (not what it sends)."""

    processes: int = 1
    connect_rate: float = 200.0  # new MQTT connections per second, whole fleet
    session_expiry_s: int = 600
    keepalive_s: int = 60
    drain_timeout_s: float = 15.0  # at the end: wait this long for QoS 1 acks
    connect_attempts: int = 5
    sync_start: bool = True  # start sending once every device of the process has connected
    record_offsets: bool = True  # read Kafka end offsets at start (for the verifier)
