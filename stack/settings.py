"""The launcher's settings (pure): defaults < IOT_* environment < command-line flags, checked on
construction (:mod:`stack.settings_checks`). :class:`stack.config.StackConfig` is these settings
plus the free ports tests and benchmarks run their servers on."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Self

from stack.errors import StackError
from stack.kafka_layout import KafkaNode, bootstrap, node_layout
from stack.mqtt_shards import shard_ports
from stack.settings_checks import check_settings
from stack.supervision import RestartPolicy

# bridge-i of `--bridges N` (N > 1) answers on bridge_http_port + 10 * (i - 1): 9100, 9110, ...
BRIDGE_PORT_STEP = 10
# Mosquitto rewrites its whole store at each save. Saving every N changes ties the save rate to
# the message rate, so with a backlog held (saturation, a Kafka outage, PUBACKs read late) the
# saves take Mosquitto's one thread: every 10,000 changes held the QoS 1 ceiling at ~21k msgs/s
# of 1 KiB where a save every 5 s let it reach 54k-60k, and melted it down under the command
# benchmark's load (docs/operations.md "What a save costs"). So the default is a save every
# mqtt_autosave_interval seconds (0 changes): a kill -9 loses what arrived in that time, and
# only what was still queued (measured in "What survives what", bench/central_autosave.py).
MQTT_AUTOSAVE_CHANGES = 0


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
class StackSettings:
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
    kafka_heap: str = _setting(
        "IOT_KAFKA_HEAP", "", "Kafka JVM heap per node (-Xmx; default 768m, 384m in a cluster)"
    )
    kafka_jvm_options: str = _setting(
        "IOT_KAFKA_JVM_OPTS",
        "",
        "more JVM options per Kafka node, space separated; a collector (-XX:+Use...GC) replaces "
        "G1 (tests: -XX:TieredStopAtLevel=1 -XX:+UseSerialGC, less CPU, slower at peak)",
    )
    kafka_nodes: int = _setting(
        "IOT_KAFKA_NODES", 1, "Kafka nodes (combined broker+controller) to run; 3 = replicated"
    )
    kafka_node_hosts: str = _setting(
        "IOT_KAFKA_NODE_HOSTS",
        "",
        "host names of the Kafka nodes, comma separated, one per node, each then on the Kafka "
        "and controller ports of its own host (containers, machines); default: all on this "
        "machine, ports +2 per node",
    )
    kafka_node_id: int = _setting(
        "IOT_KAFKA_NODE_ID", 1, "the node `iot-stack serve kafka` runs (1..kafka_nodes)"
    )
    kafka_cluster_id: str = _setting(
        "IOT_KAFKA_CLUSTER_ID",
        "",
        "KRaft cluster id the nodes share (default: generated once, kept in the data dir)",
    )
    kafka_session_timeout_ms: int = _setting(
        "IOT_KAFKA_SESSION_TIMEOUT_MS",
        6000,
        "broker.session.timeout.ms: how long a dead broker stalls acks=all writes before the "
        "controller fences it (docs/operations.md, Kafka cluster)",
    )
    external_kafka: str = _setting(
        "IOT_STACK_KAFKA_BOOTSTRAP",
        "",
        "an existing Kafka cluster (host:port,...) to use instead of starting one",
    )
    kafka_security: str = _setting(
        "IOT_KAFKA_SECURITY",
        "plaintext",
        "Kafka's listeners: plaintext (one machine, loopback) or sasl_ssl (between hosts: TLS "
        "from the appliance CA, SCRAM-SHA-512 per service, ACLs; docs/security.md)",
    )
    kafka_retention_hours: int = _setting("IOT_KAFKA_RETENTION_HOURS", 168, "topic retention")
    start_timeout: float = _setting("IOT_START_TIMEOUT", 90.0, "seconds to wait for each server")
    mqtt_autosave_interval: int = _setting(
        "IOT_MQTT_AUTOSAVE_INTERVAL",
        5,
        "seconds between Mosquitto persistence saves (with mqtt_autosave_changes 0, the "
        "default): a kill -9 of Mosquitto loses at most what it accepted in that time",
    )
    mqtt_autosave_changes: int = _setting(
        "IOT_MQTT_AUTOSAVE_CHANGES",
        MQTT_AUTOSAVE_CHANGES,
        "0 (default): Mosquitto saves its store every mqtt_autosave_interval s; N: after every N "
        "changes instead (a kill -9 loses about N at most, but with a backlog the saves come back "
        "to back and cost most of Mosquitto's thread: docs/operations.md)",
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
    bridges: int = _setting(
        "IOT_STACK_BRIDGES",
        1,
        "bridge processes; more than 1 share one MQTT subscription ($share/iot-bridge/...), "
        "each with its own session and metrics port, and per-device order is then not kept",
    )
    mqtt_shards: int = _setting(
        "IOT_STACK_MQTT_SHARDS",
        1,
        "Mosquitto processes behind one listener (mqtt_port, HAProxy routing each client by a "
        "hash of its client id); each on mqtt_port + i with its own bridge-i; 1 = one Mosquitto "
        "on mqtt_port (docs/scaling.md)",
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
    api_tls_port: int = _setting(
        "IOT_STACK_API_TLS_PORT", 0,
        "iot-api's HTTPS port (0 = none), with the appliance CA's server certificate "
        "(<data-dir>/ca, made on first use)",
    )  # fmt: skip
    api_console: bool = _setting(
        "IOT_STACK_CONSOLE", False, "serve the operator console under iot-api's /console"
    )
    with_amqp: bool = _setting(
        "IOT_STACK_AMQP", False,
        "start iot-amqp (the AMQP 1.0 door for devices, docs/amqp.md) with the servers",
    )  # fmt: skip
    amqp_port: int = _setting("IOT_STACK_AMQP_PORT", 5672, "iot-amqp's AMQP port")
    amqp_tls: bool = _setting("IOT_STACK_AMQP_TLS", True, "iot-amqp's amqps listener (TLS)")
    amqp_tls_port: int = _setting("IOT_STACK_AMQP_TLS_PORT", 5671, "iot-amqp's amqps port")
    amqp_http_port: int = _setting("IOT_STACK_AMQP_HTTP_PORT", 9106, "iot-amqp's /metrics port")
    with_analytics: bool = _setting(
        "IOT_STACK_ANALYTICS", False, "start the Spark streaming job with the servers"
    )
    analytics_http_port: int = _setting(
        "IOT_STACK_ANALYTICS_HTTP_PORT", 9102, "the streaming job's health and metrics port"
    )
    with_connect: bool = _setting(
        "IOT_STACK_CONNECT", True,
        "with the analytics job, also start Spark Connect behind nginx (TLS, appliance CA, "
        "token in <secrets>/spark-connect.token): the remote query endpoint, docs/analytics.md",
    )  # fmt: skip
    connect_port: int = _setting("IOT_STACK_CONNECT_PORT", 15002, "Spark Connect's TLS port")
    connect_server_port: int = _setting(
        "IOT_STACK_CONNECT_SERVER_PORT", 15003, "the Connect server's own port, on loopback"
    )
    connect_jvm_options: str = _setting("IOT_SPARK_DRIVER_JAVA_OPTIONS", "", "more JVM options "
        "of the Spark drivers: the Connect server's and the analytics job's")  # fmt: skip
    # --- Spark (docs/operations.md, "Spark cluster") ---
    spark_master: str = _setting(
        "IOT_SPARK_MASTER",
        "",
        "the analytics job's Spark master when `up` starts no cluster: local[N] or "
        "spark://host:port of one elsewhere (empty: the job's default, local[*])",
    )
    spark_workers: int = _setting(
        "IOT_STACK_SPARK_WORKERS",
        0,
        "start a Spark standalone master and this many workers; the analytics job runs on them",
    )
    spark_master_port: int = _setting("IOT_STACK_SPARK_MASTER_PORT", 7077, "Spark master port")
    spark_master_ui_port: int = _setting(
        "IOT_STACK_SPARK_MASTER_UI_PORT", 8080, "Spark master web UI port"
    )
    spark_worker_ui_port: int = _setting(
        "IOT_STACK_SPARK_WORKER_UI_PORT", 8081, "web UI port of worker 1 (worker N: + N - 1)"
    )
    spark_worker_cores: int = _setting(
        "IOT_STACK_SPARK_WORKER_CORES",
        2,
        "cores each worker offers (slots, not pinned CPUs): 1 for the streaming job's "
        "executor, 1 left for a report or SQL query beside it",
    )
    spark_worker_memory: str = _setting(
        "IOT_STACK_SPARK_WORKER_MEMORY", "1g", "memory each worker offers its executors"
    )
    spark_daemon_memory: str = _setting(
        "IOT_STACK_SPARK_DAEMON_MEMORY", "256m", "heap of the master and of each worker JVM"
    )
    spark_daemon_jvm_options: str = _setting("IOT_STACK_SPARK_DAEMON_JAVA_OPTS", "", "more JVM "
        "options of the master and each worker, space separated (the tests': C1 only)")  # fmt: skip
    spark_executor_memory: str = _setting(
        "IOT_STACK_SPARK_EXECUTOR_MEMORY", "512m", "heap of each analytics executor"
    )
    spark_executor_jvm_options: str = _setting("IOT_SPARK_EXECUTOR_JAVA_OPTIONS", "", "more JVM "
        "options of the analytics job's executors (passed on to the job)")  # fmt: skip
    spark_app_ui_port: int = _setting(
        "IOT_STACK_SPARK_APP_UI_PORT", 4040, "the analytics job's Spark UI port on the cluster"
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
    mqtt_tls: bool = _setting(
        "IOT_STACK_MQTT_TLS",
        True,
        "open Mosquitto's mutual-TLS listener for devices with certificates (not with "
        "insecure_anonymous, which has no identities)",
    )
    mqtt_tls_port: int = _setting("IOT_MQTT_TLS_PORT", 8883, "Mosquitto's mutual-TLS port")
    tls_ca_dir: str = _setting(
        "IOT_REGISTRY_CA_DIR",
        "",
        "the appliance CA, created on first start (default <data dir>/ca; `iot-devices cert` "
        "reads the same variable)",
    )
    tls_ca_cert: str = _setting(
        "IOT_STACK_TLS_CA_CERT", "", "the operator's own CA certificate (PEM), used on first start"
    )
    tls_ca_key: str = _setting(
        "IOT_STACK_TLS_CA_KEY", "", "the operator's own CA key (PEM, EC), used on first start"
    )
    tls_server_names: str = _setting(
        "IOT_STACK_TLS_SERVER_NAMES",
        "",
        "more host names or IPs of the TLS listener's certificate, comma separated "
        "(localhost, 127.0.0.1 and the bind address always)",
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
        check_settings(self)
        object.__setattr__(self, "data_dir", Path(self.data_dir).resolve())

    @property
    def analytics_master(self) -> str:
        """Where the analytics job runs ('' = its own default)."""
        if self.spark_workers:
            return f"spark://{self.connect_host}:{self.spark_master_port}"
        return self.spark_master

    @property
    def spark_dir(self) -> Path:
        return self.data_dir / "spark"

    @classmethod
    def from_env(cls, **overrides: Any) -> Self:
        """Defaults, then IOT_* environment, then the given (non-None) overrides."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            kind = type(f.default)
            values[f.name] = _env(f.metadata["env"], f.default, kind)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(
            initial_s=self.restart_backoff_initial,
            max_s=self.restart_backoff_max,
            stable_s=self.restart_stable,
        )

    def with_changes(self, **changes: Any) -> Self:
        return replace(self, **changes)

    def bridge_http_port_of(self, index: int) -> int:
        """The metrics/health port of shared bridge instance `index` (1-based)."""
        return self.bridge_http_port + BRIDGE_PORT_STEP * (max(index, 1) - 1)

    @property
    def bridge_instances(self) -> int:
        """How many `bridge-i` instances `up` starts: one per MQTT shard, or `bridges`."""
        return self.mqtt_shards if self.mqtt_shards > 1 else self.bridges

    def commands_http_port_of(self, index: int) -> int:
        """`commands`' port; `commands-i`'s (one per MQTT shard): + 10 x (i - 1)."""
        return self.commands_http_port + BRIDGE_PORT_STEP * (max(index, 1) - 1)

    @property
    def mqtt_shard_ports(self) -> list[int]:
        """The MQTT shards' own ports (none with one shard: Mosquitto is on mqtt_port)."""
        return shard_ports(self.mqtt_port, self.mqtt_shards)

    @property
    def controller_port(self) -> int:
        return self.kafka_controller_port or self.kafka_port + 1

    @property
    def connect_host(self) -> str:
        """The address clients use: the bind address, unless that is a wildcard."""
        return "127.0.0.1" if self.bind_host in {"0.0.0.0", "::", ""} else self.bind_host

    @property
    def kafka_layout(self) -> list[KafkaNode]:
        """The local Kafka nodes (also when `external_kafka` is set: then none is started)."""
        hosts = tuple(h.strip() for h in self.kafka_node_hosts.split(",") if h.strip())
        return node_layout(
            self.kafka_nodes, self.connect_host, self.kafka_port, self.controller_port, hosts
        )

    @property
    def kafka_bootstrap(self) -> str:
        """What every client is given: all nodes (or the external cluster), comma separated."""
        if self.external_kafka:
            return self.external_kafka
        return bootstrap(self.kafka_layout)

    @property
    def kafka_heap_size(self) -> str:
        # 3 nodes x 384m leave room for Spark and the services on a 2-core, few-GiB machine
        return self.kafka_heap or ("768m" if self.kafka_nodes == 1 else "384m")

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
