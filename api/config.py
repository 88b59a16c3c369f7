"""The one configuration of `iot-api`: defaults < ``IOT_*`` environment < flags.

Each setting is a field of :class:`ApiConfig`; its environment variable is ``IOT_`` + the field
name in upper case (``api_port`` -> ``IOT_API_PORT``) and its flag ``--`` + the name with dashes
(``--api-port``), as the bridge's. Frozen and validated on construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.errors import ConfigError
from appconfig import kafka_security as _ks
from appconfig import settings as appsettings

_LOG_LEVELS = appsettings.LOG_LEVELS
_TOPIC_RE = appsettings.KAFKA_TOPIC_RE


_setting = appsettings.setting


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """All `iot-api` settings. Build with :meth:`load`."""

    api_host: str = _setting("127.0.0.1", "Address the HTTP API listens on.")
    api_port: int = _setting(3904, "HTTP port (3904 is MR's); 0 = pick a free port (logged).")
    tls_port: int = _setting(
        0, "HTTPS port served beside api_port with the same API (0 = no TLS listener)."
    )
    tls_cert_file: str = _setting(
        "", "TLS: the server certificate (chain, PEM); empty = the appliance CA's (tls_ca_dir)."
    )
    tls_key_file: str = _setting("", "TLS: the certificate's private key (PEM).")
    tls_ca_dir: str = _setting(
        "var/ca",
        "TLS without cert files: the appliance CA's directory (iot-devices --ca-dir); its "
        "server.crt/server.key are served, and the CA is made there if there is none.",
    )
    kafka_bootstrap: str = _setting("localhost:9092", "Kafka bootstrap servers (host:port,...).")
    kafka_linger_ms: int = _setting(5, "Producer linger.ms (a publish waits for its batch).")
    kafka_consumer_stall_s: float = _setting(
        30.0,
        "A long-lived consumer (the console's tailer, the operator feed, the registry "
        "followers, MR's consumer ids, the queues' members) whose partitions have records "
        "past its position that it has not advanced on for this long is replaced (s).",
    )
    # --- Kafka security (appconfig.kafka_security, docs/security.md) ---
    kafka_security_protocol: str = _setting("", _ks.HELP["kafka_security_protocol"])
    kafka_sasl_mechanism: str = _setting("SCRAM-SHA-512", _ks.HELP["kafka_sasl_mechanism"])
    kafka_sasl_username: str = _setting("", _ks.HELP["kafka_sasl_username"])
    kafka_sasl_password_file: str = _setting("", _ks.HELP["kafka_sasl_password_file"])
    kafka_ssl_ca_file: str = _setting("", _ks.HELP["kafka_ssl_ca_file"])
    publish_timeout_ms: int = _setting(
        30000,
        "How long a publish waits for Kafka's acknowledgement (producer message.timeout.ms) "
        "before answering 503: Kafka down never hangs a request.",
    )
    max_message_bytes: int = _setting(1048576, "Largest message of a publish (bytes; 413 above).")
    max_request_bytes: int = _setting(
        10485760, "Largest publish body, after gzip for cambria-zip (bytes; 413 above)."
    )
    poll_timeout_ms: int = _setting(10000, "Long-poll timeout when the request gives none (ms).")
    poll_timeout_max_ms: int = _setting(60000, "Longest long poll a request may ask for (ms).")
    poll_limit: int = _setting(4096, "Messages per consume answer when `limit` is absent or 0.")
    max_consumers: int = _setting(
        900,
        "MR consumers held at once (one librdkafka client per (topic, group, id)). A process "
        "can hold about 1,010 librdkafka clients (each takes one of glibc's 1,024 pthread keys "
        "in confluent-kafka) and iot-api needs some for itself. A new id beyond this closes the "
        "least recently used idle consumer; with none idle it is answered 429 (mrstatus 5012).",
    )
    consumer_idle_s: float = _setting(
        120.0,
        "A (topic, group, id) consumer not asked for this long is closed; what it fetched and "
        "did not return is read again by the next one (nothing is committed unreturned).",
    )
    auto_create_topics: bool = _setting(
        True, "Publishing to a topic that does not exist creates it (as MR); off = 404."
    )
    default_partitions: int = _setting(
        0, "Partitions of a topic created without a count (0 = the broker's default)."
    )
    insecure_anonymous: bool = _setting(
        False,
        "Serve without authentication (development only). Without it and without "
        "registry_auth the service refuses to start.",
    )
    registry_auth: bool = _setting(
        False, "HTTP Basic auth against the registry's service accounts (user:secret)."
    )
    registry_topic: str = _setting("iot.registry", "Compacted registry topic (registry_auth).")
    registry_audit_topic: str = _setting(
        "iot.registry.audit", "The registry's audit topic (api key and ACL changes are audited)."
    )
    registry_transactional_id: str = _setting(
        "iot-registry", "The registry writers' transactional id (/apiKeys and ACL changes)."
    )
    api_key_master_file: str = _setting(
        "",
        "File of the key that derives api key secrets (made 0600 on first start). Needed for "
        "Cambria HMAC signatures; without it keys work with bearer and Basic only.",
    )
    hmac_window_s: float = _setting(
        600.0, "Cambria HMAC clock window: |now - X-CambriaDate| at most this (s)."
    )
    max_long_polls: int = _setting(
        1000, "Long polls served at once; one more is answered 429 (mrstatus 5012) at once."
    )
    shutdown_timeout_s: float = _setting(
        10.0, "On SIGTERM: how long in-flight requests get to finish."
    )
    log_level: str = _setting("INFO", "Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    # sawmill's facade and the queues (issue 14 items 3-4)
    sse_heartbeat_s: float = _setting(
        15.0, "Server-Sent Events: a comment line after this long without an event (s)."
    )
    max_sse_streams: int = _setting(
        100,
        "Server-Sent Events streams served at once (sawmill's realtime and device telemetry "
        "together); one more is answered 429 (mrstatus 5012) at once.",
    )
    # commands and devices over HTTP (issue 14 item 6, docs/api.md)
    topic_commands: str = _setting("iot.commands", "Operator routes: the command topic.")
    topic_command_status: str = _setting(
        "iot.command-status", "Operator routes: the command path's (compacted) status topic."
    )
    topic_command_replies: str = _setting(
        "iot.command-replies", "Operator routes: the command path's reply topic."
    )
    topic_telemetry: str = _setting(
        "iot.telemetry",
        "Telemetry topic, as the bridge's (a tenant's: iot.<tenant>.telemetry): operator "
        "routes read it, HTTP devices write it.",
    )
    command_wait_max_s: float = _setting(60.0, "Longest `?wait=` of a command sent over HTTP (s).")
    command_history_scan_max: int = _setting(
        100000, "Most status records one command history request reads from Kafka."
    )
    registry_mqtt_host: str = _setting(
        "127.0.0.1", "Mosquitto for registry changes over HTTP (dynamic security)."
    )
    registry_mqtt_port: int = _setting(1883, "Mosquitto port for registry changes over HTTP.")
    registry_mqtt_shard_ports: str = _setting(
        "",
        "With `iot-stack up --mqtt-shards N`: the shards' own ports (comma separated); registry "
        "changes over HTTP then go to each shard instead of registry_mqtt_port.",
    )
    registry_admin_password_file: str = _setting(
        "",
        "File with the password of Mosquitto's svc/registry admin client: devices added over "
        "HTTP get their MQTT credentials at once; without it changes are saved in the registry "
        "only (`iot-devices mosquitto sync` applies them).",
    )
    queue_markers_topic: str = _setting(
        "iot.api.queue-markers", "Queues: the topic holding receive/ack/redelivery markers."
    )
    queue_markers_partitions: int = _setting(3, "Queues: partitions of the markers topic.")
    queue_settings_topic: str = _setting(
        "iot.api.queue-settings",
        "Queues: the compacted topic keeping each queue's own visibility timeout and maximum "
        "deliveries (set by PUT /queues/{q} or /queues/{q}/settings).",
    )
    queue_visibility_s: float = _setting(
        30.0, "Queues: visibility timeout of a receive that gives none (s)."
    )
    queue_visibility_max_s: float = _setting(43200.0, "Queues: longest visibility timeout (s).")
    queue_max_deliveries: int = _setting(
        5, "Queues: deliveries of a message before it goes to the queue's dead-letter topic."
    )
    queue_clock_grace_ms: int = _setting(
        1000,
        "Queues: a message is redelivered this long after its visibility deadline (covers "
        "clock skew between instances; an ack recorded by the deadline always wins).",
    )

    # HTTP devices (issue 14 item 5, api/http_devices/, docs/api.md "HTTP devices")
    topic_events: str = _setting("iot.events", "HTTP devices: events topic (as the bridge).")
    topic_dlq: str = _setting("iot.dlq", "HTTP devices: dead-letter topic (as the bridge).")
    max_payload_bytes: int = _setting(
        65536, "HTTP devices: largest telemetry/event payload (the bridge's; DLQ `oversized`)."
    )
    tenant_quotas: str = _setting(
        "", "HTTP devices: msgs/s per tenant `t=N,...` for tenants without a registry quota."
    )
    device_ttd_max_s: int = _setting(
        60, "HTTP devices: longest wait for a command in one request (caps `hono-ttd`)."
    )
    mqtt_host: str = _setting("localhost", "HTTP devices' commands: Mosquitto host.")
    mqtt_port: int = _setting(1883, "HTTP devices' commands: Mosquitto port.")
    mqtt_username: str = _setting(
        "", "HTTP devices' commands: MQTT user (a registry account with role `api`, `svc/<name>`)."
    )
    mqtt_password: str = _setting("", "MQTT password.", secret=True)
    mqtt_password_file: str = _setting(
        "", "File holding the MQTT password (first line; wins over mqtt_password)."
    )
    device_session_expiry_s: int = _setting(
        86400, "HTTP devices: MQTT session expiry (commands wait this long for the device)."
    )
    device_session_idle_s: float = _setting(
        120.0, "HTTP devices: close a device's MQTT connection after this long without a request."
    )

    def __post_init__(self) -> None:
        checks = [
            (bool(self.api_host), "api_host must not be empty"),
            (0 <= self.api_port <= 65535, "api_port must be 0-65535"),
            (bool(self.kafka_bootstrap), "kafka_bootstrap must not be empty"),
            (_ks.problem(self) is None, _ks.problem(self) or ""),
            (0 <= self.tls_port <= 65535, "tls_port must be 0-65535"),
            (
                bool(self.tls_cert_file) == bool(self.tls_key_file),
                "tls_cert_file and tls_key_file go together",
            ),
            (0 <= self.kafka_linger_ms <= 1000, "kafka_linger_ms must be 0-1000"),
            (self.kafka_consumer_stall_s > 0, "kafka_consumer_stall_s must be > 0"),
            (self.publish_timeout_ms >= 1, "publish_timeout_ms must be >= 1"),
            (self.max_message_bytes >= 1, "max_message_bytes must be >= 1"),
            (
                self.max_request_bytes >= self.max_message_bytes,
                "max_request_bytes must be >= max_message_bytes",
            ),
            (0 <= self.poll_timeout_ms <= self.poll_timeout_max_ms, "need poll_timeout_ms <= max"),
            (self.poll_limit >= 1, "poll_limit must be >= 1"),
            (self.consumer_idle_s > 0, "consumer_idle_s must be > 0"),
            (self.max_consumers >= 1, "max_consumers must be >= 1"),
            (self.default_partitions >= 0, "default_partitions must be >= 0"),
            (bool(_TOPIC_RE.match(self.registry_topic)), "registry_topic is not a Kafka topic"),
            (self.shutdown_timeout_s >= 0, "shutdown_timeout_s must be >= 0"),
            (self.hmac_window_s > 0, "hmac_window_s must be > 0"),
            (self.max_long_polls >= 1, "max_long_polls must be >= 1"),
            (self.log_level in _LOG_LEVELS, f"log_level must be one of {_LOG_LEVELS}"),
            (self.sse_heartbeat_s > 0, "sse_heartbeat_s must be > 0"),
            (self.max_sse_streams >= 1, "max_sse_streams must be >= 1"),
            (self.command_wait_max_s >= 0, "command_wait_max_s must be >= 0"),
            (self.command_history_scan_max >= 1, "command_history_scan_max must be >= 1"),
            (0 < self.registry_mqtt_port <= 65535, "registry_mqtt_port must be 1-65535"),
            (bool(_TOPIC_RE.match(self.queue_markers_topic)), "queue_markers_topic is not a topic"),
            (
                bool(_TOPIC_RE.match(self.queue_settings_topic)),
                "queue_settings_topic is not a topic",
            ),
            (self.queue_markers_partitions >= 1, "queue_markers_partitions must be >= 1"),
            (
                0 < self.queue_visibility_s <= self.queue_visibility_max_s,
                "need 0 < queue_visibility_s <= queue_visibility_max_s",
            ),
            (self.queue_max_deliveries >= 1, "queue_max_deliveries must be >= 1"),
            (self.queue_clock_grace_ms >= 0, "queue_clock_grace_ms must be >= 0"),
            (self.max_payload_bytes >= 1, "max_payload_bytes must be >= 1"),
            (self.device_ttd_max_s >= 0, "device_ttd_max_s must be >= 0"),
            (0 < self.mqtt_port <= 65535, "mqtt_port must be 1-65535"),
            (0 <= self.device_session_expiry_s <= 0xFFFFFFFF, "device_session_expiry_s range"),
            (self.device_session_idle_s > 0, "device_session_idle_s must be > 0"),
        ]
        appsettings.check_all(checks, "api", ConfigError)

    def check_can_start(self) -> None:
        """Never anonymous by default: some authentication, or the explicit dev flag."""
        if not (self.insecure_anonymous or self.registry_auth):
            raise ConfigError(
                "no authentication configured: give --registry-auth (Basic auth against the "
                "registry's service accounts) or, for development only, --insecure-anonymous"
            )

    @classmethod
    def load(
        cls,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> ApiConfig:
        return PARSER.load(argv, environ, **overrides)


PARSER = appsettings.SettingsParser(ApiConfig, "api settings", ConfigError)
add_arguments = PARSER.add_arguments
from_namespace = PARSER.from_namespace
