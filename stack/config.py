"""The launcher's one typed config: defaults < IOT_* environment < command-line flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from stack.errors import StackError
from stack.ports import free_ports
from stack.supervision import RestartPolicy

COMMANDS_MODES = ("separate", "inline", "off")


def _env(name: str, default: Any, kind: type) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if kind is bool:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    try:
        return kind(raw)
    except ValueError as exc:
        raise StackError(f"{name}={raw!r} is not a valid {kind.__name__}") from exc


def _setting(env: str, default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"env": env, "help": help_text})


@dataclass(frozen=True)
class StackConfig:
    """Where the local stack keeps its data, which ports it listens on, what it starts."""

    data_dir: Path = _setting(
        "IOT_DATA_DIR", Path("var"), "directory for all data, logs, pid files"
    )
    bind_host: str = _setting("IOT_BIND_HOST", "127.0.0.1", "address the servers listen on")
    mqtt_port: int = _setting("IOT_MQTT_PORT", 1883, "Mosquitto listener port")
    kafka_port: int = _setting("IOT_KAFKA_PORT", 9092, "Kafka client listener port")
    kafka_controller_port: int = _setting(
        "IOT_KAFKA_CONTROLLER_PORT", 0, "KRaft controller port (0 = Kafka port + 1)"
    )
    kafka_advertised_host: str = _setting(
        "IOT_KAFKA_ADVERTISED_HOST", "", "host name clients reach Kafka by (default: bind host)"
    )
    partitions: int = _setting("IOT_PARTITIONS", 12, "partitions of the data topics")
    kafka_heap: str = _setting("IOT_KAFKA_HEAP", "768m", "Kafka JVM heap (-Xmx)")
    kafka_retention_hours: int = _setting("IOT_KAFKA_RETENTION_HOURS", 168, "topic retention")
    start_timeout: float = _setting("IOT_START_TIMEOUT", 90.0, "seconds to wait for each server")
    mqtt_autosave_interval: int = _setting(
        "IOT_MQTT_AUTOSAVE_INTERVAL", 5, "seconds between Mosquitto persistence saves"
    )
    mqtt_session_expiry: str = _setting(
        "IOT_MQTT_SESSION_EXPIRY", "14d", "drop persistent sessions unused this long"
    )
    mqtt_max_inflight: int = _setting(
        "IOT_MQTT_MAX_INFLIGHT", 0, "per-client outgoing QoS 1 window (0 = client's Receive Max)"
    )
    mqtt_max_queued_messages: int = _setting(
        "IOT_MQTT_MAX_QUEUED_MESSAGES", 2_000_000, "messages queued per offline/slow session"
    )
    mqtt_max_queued_bytes: int = _setting(
        "IOT_MQTT_MAX_QUEUED_BYTES", 2 * 1024**3, "bytes queued per offline/slow session"
    )
    mqtt_max_packet_size: int = _setting(
        "IOT_MQTT_MAX_PACKET_SIZE", 1024 * 1024, "largest MQTT packet accepted"
    )
    with_bridge: bool = _setting("IOT_STACK_BRIDGE", True, "start the bridge with the servers")
    bridge_http_port: int = _setting(
        "IOT_STACK_BRIDGE_HTTP_PORT", 9100, "the bridge's metrics and health port"
    )
    commands_mode: str = _setting(
        "IOT_STACK_COMMANDS_MODE",
        "separate",
        "where the command path runs with the bridge: separate (its own process, `iot-cmd "
        "serve`), inline (a thread of iot-bridge) or off",
    )
    commands_http_port: int = _setting(
        "IOT_STACK_COMMANDS_HTTP_PORT", 9101, "the separate command path's metrics and health port"
    )
    with_api: bool = _setting(
        "IOT_STACK_API", True, "start iot-api (the HTTP door, docs/api.md) with the servers"
    )
    api_port: int = _setting("IOT_STACK_API_PORT", 3904, "iot-api's HTTP port")
    api_console: bool = _setting(
        "IOT_STACK_CONSOLE", False, "serve the operator console under iot-api's /console"
    )
    with_analytics: bool = _setting(
        "IOT_STACK_ANALYTICS", False, "start the Spark streaming job with the servers"
    )
    analytics_http_port: int = _setting(
        "IOT_STACK_ANALYTICS_HTTP_PORT", 9102, "the streaming job's health and metrics port"
    )
    devices: int = _setting("IOT_STACK_DEVICES", 0, "simulated devices to run (0 = none)")
    device_rate: float = _setting(
        "IOT_STACK_DEVICE_RATE", 1.0, "messages per second per simulated device"
    )
    device_hours: float = _setting(
        "IOT_STACK_DEVICE_HOURS", 24.0, "how long the simulated devices run"
    )
    insecure_anonymous: bool = _setting(
        "IOT_STACK_INSECURE_ANONYMOUS",
        False,
        "development only: Mosquitto without authentication (anyone who reaches the port may "
        "publish as any device); off = the dynamic-security plugin, every client logs in",
    )
    secrets_home: str = _setting(
        "IOT_STACK_SECRETS_DIR",
        "",
        "where the secret files live (mode 0600; default <data dir>/secrets)",
    )
    supervise: bool = _setting(
        "IOT_STACK_SUPERVISE", True, "run the services under the supervisor, which restarts them"
    )
    restart_backoff_initial: float = _setting(
        "IOT_STACK_RESTART_BACKOFF_INITIAL", 1.0, "seconds before the first restart of a streak"
    )
    restart_backoff_max: float = _setting(
        "IOT_STACK_RESTART_BACKOFF_MAX", 30.0, "longest wait between restarts (doubling up to it)"
    )
    restart_stable: float = _setting(
        "IOT_STACK_RESTART_STABLE", 60.0, "seconds up after which a service's backoff starts over"
    )

    def __post_init__(self) -> None:
        for name in ("mqtt_port", "kafka_port", "kafka_controller_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise StackError(f"{name} must be a TCP port, got {value}")
        if self.mqtt_port == 0 or self.kafka_port == 0:
            raise StackError("mqtt_port and kafka_port must be fixed ports (use free_port())")
        for name in ("bridge_http_port", "commands_http_port", "analytics_http_port", "api_port"):
            value = getattr(self, name)
            if not 1 <= value <= 65535:
                raise StackError(f"{name} must be a fixed TCP port, got {value}")
        if self.commands_mode not in COMMANDS_MODES:
            raise StackError(
                f"commands_mode must be one of {', '.join(COMMANDS_MODES)}, "
                f"got {self.commands_mode!r}"
            )
        if self.commands_mode == "separate" and self.bridge_http_port == self.commands_http_port:
            raise StackError(
                f"bridge_http_port and commands_http_port are both {self.bridge_http_port}"
            )
        if self.partitions < 1:
            raise StackError(f"partitions must be >= 1, got {self.partitions}")
        if not 0 < self.restart_backoff_initial <= self.restart_backoff_max:
            raise StackError("need 0 < restart_backoff_initial <= restart_backoff_max")
        object.__setattr__(self, "data_dir", Path(self.data_dir).resolve())

    @classmethod
    def from_env(cls, **overrides: Any) -> StackConfig:
        """Defaults, then IOT_* environment, then the given (non-None) overrides."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            kind = type(f.default)
            values[f.name] = _env(f.metadata["env"], f.default, kind)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def servers_on_free_ports(
        cls, data_dir: Path, partitions: int = 12, kafka_heap: str = "768m"
    ) -> StackConfig:
        """Only Mosquitto and Kafka, on ports free now: for tests and benchmarks.

        Not supervised: fault tests stop, kill and restart the servers themselves. Anonymous
        (explicitly) until the fixtures provision what they need (issue 13 phase 3).
        """
        mqtt_port, kafka_port, controller_port = free_ports(3)
        return cls(
            data_dir=data_dir,
            mqtt_port=mqtt_port,
            kafka_port=kafka_port,
            kafka_controller_port=controller_port,
            partitions=partitions,
            kafka_heap=kafka_heap,
            with_bridge=False,
            with_api=False,
            with_analytics=False,
            supervise=False,
            insecure_anonymous=True,
        )

    @property
    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(
            initial_s=self.restart_backoff_initial,
            max_s=self.restart_backoff_max,
            stable_s=self.restart_stable,
        )

    def with_changes(self, **changes: Any) -> StackConfig:
        return replace(self, **changes)

    @property
    def controller_port(self) -> int:
        return self.kafka_controller_port or self.kafka_port + 1

    @property
    def connect_host(self) -> str:
        """The address clients use: the bind address, unless that is a wildcard."""
        return "127.0.0.1" if self.bind_host in {"0.0.0.0", "::", ""} else self.bind_host

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.connect_host}:{self.kafka_port}"

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://{self.connect_host}:{self.mqtt_port}"

    @property
    def warehouse_dir(self) -> Path:
        return self.data_dir / "warehouse"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def secrets_dir(self) -> Path:
        """Secret files (mode 0600): the registry admin's, the services', the devices'."""
        return Path(self.secrets_home).resolve() if self.secrets_home else self.data_dir / "secrets"
