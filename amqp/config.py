"""The one configuration of `iot-amqp`: defaults < ``IOT_*`` environment < flags.

Each setting is a field of :class:`AmqpConfig`; its environment variable is ``IOT_`` + the field
name in upper case (``amqp_port`` -> ``IOT_AMQP_PORT``) and its flag ``--`` + the name with
dashes (``--amqp-port``), as the other services'. Frozen and validated on construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amqp.errors import ConfigError
from appconfig import kafka_security as _ks
from appconfig import settings as appsettings

_setting = appsettings.setting
_TOPIC_RE = appsettings.KAFKA_TOPIC_RE


@dataclass(frozen=True, slots=True)
class AmqpConfig:
    """All `iot-amqp` settings. Build with :meth:`load`."""

    amqp_host: str = _setting("127.0.0.1", "Address the AMQP listener binds to.")
    amqp_port: int = _setting(5672, "AMQP port (5672, plain); 0 = pick a free port (logged).")
    amqps_port: int = _setting(
        5671,
        "AMQP over TLS (amqps) beside amqp_port: SASL PLAIN, or SASL EXTERNAL with a client "
        "certificate of the appliance CA; 0 = no TLS listener.",
    )
    tls_cert_file: str = _setting(
        "", "TLS: the server certificate (chain, PEM); empty = the appliance CA's (tls_ca_dir)."
    )
    tls_key_file: str = _setting("", "TLS: the certificate's private key (PEM).")
    tls_ca_dir: str = _setting(
        "var/ca",
        "The appliance CA's directory (iot-devices --ca-dir): client certificates must chain to "
        "its ca.crt; its server.crt/server.key are served without cert files (made if missing).",
    )
    http_host: str = _setting("127.0.0.1", "Address of /metrics, /healthz, /readyz.")
    http_port: int = _setting(9106, "Port of /metrics, /healthz, /readyz; 0 = a free port.")
    kafka_bootstrap: str = _setting("localhost:9092", "Kafka bootstrap servers (host:port,...).")
    kafka_linger_ms: int = _setting(5, "Producer linger.ms.")
    kafka_consumer_stall_s: float = _setting(
        30.0,
        "A northbound link's Kafka consumer, not paused for want of credit, whose partitions "
        "have records past its position that it has not advanced on for this long is "
        "replaced by a new member of the link's group (s); as iot-api's setting.",
    )
    # --- Kafka security (appconfig.kafka_security, docs/security.md) ---
    kafka_security_protocol: str = _setting("", _ks.HELP["kafka_security_protocol"])
    kafka_sasl_mechanism: str = _setting("SCRAM-SHA-512", _ks.HELP["kafka_sasl_mechanism"])
    kafka_sasl_username: str = _setting("", _ks.HELP["kafka_sasl_username"])
    kafka_sasl_password_file: str = _setting("", _ks.HELP["kafka_sasl_password_file"])
    kafka_ssl_ca_file: str = _setting("", _ks.HELP["kafka_ssl_ca_file"])
    publish_timeout_ms: int = _setting(
        30000,
        "How long an unsettled upload waits for Kafka's acknowledgement (producer "
        "message.timeout.ms) before it is released (the client may resend it).",
    )
    topic_telemetry: str = _setting("iot.telemetry", "Kafka topic for telemetry (default tenant).")
    topic_events: str = _setting("iot.events", "Kafka topic for events (default tenant).")
    topic_dlq: str = _setting("iot.dlq", "Kafka topic for dead letters (default tenant).")
    topic_commands: str = _setting(
        "iot.commands", "The command path's commands topic (applications' `command/{tenant}`)."
    )
    topic_command_replies: str = _setting(
        "iot.command-replies",
        "The command path's replies topic (applications' `command_response/{tenant}/{id}`).",
    )
    topic_command_status: str = _setting(
        "iot.command-status",
        "The command path's status topic: a command it rejects after iot-amqp wrote it gets a "
        "400 on the application's `command_response/{tenant}/{id}` link.",
    )
    north_max_links: int = _setting(
        64, "Applications' telemetry/event links at once (each holds a Kafka consumer)."
    )
    queue_markers_topic: str = _setting(
        "iot.api.queue-markers",
        "Queues (`queue/{q}`): iot-api's markers topic (the same as its queue_markers_topic).",
    )
    queue_settings_topic: str = _setting(
        "iot.api.queue-settings", "Queues: iot-api's queue-settings topic (per-queue settings)."
    )
    queue_visibility_s: float = _setting(
        30.0, "Queues: visibility timeout of a queue without its own (as iot-api's default)."
    )
    queue_max_deliveries: int = _setting(
        5, "Queues: deliveries before the dead-letter topic, for a queue without its own."
    )
    max_payload_bytes: int = _setting(
        65536, "Largest payload the bridge's validation takes (bigger: DLQ `oversized`)."
    )
    max_message_bytes: int = _setting(
        1048576,
        "max-message-size advertised on a device's link; a bigger message detaches the link "
        "with amqp:link:message-size-exceeded.",
    )
    link_credit: int = _setting(
        1000,
        "Credit per sender link of a device; given back only when Kafka answered a message.",
    )
    max_frame_bytes: int = _setting(16384, "max-frame-size offered in the open frame.")
    idle_timeout_s: float = _setting(60.0, "Idle timeout offered in the open frame (s).")
    registry_auth: bool = _setting(
        False,
        "Log-ins (SASL PLAIN) are checked against the registry: devices as `id`, `id@tenant` "
        "or `tenant/id`, service accounts as `svc/name`.",
    )
    insecure_anonymous: bool = _setting(
        False,
        "Offer SASL ANONYMOUS and take no log-in (development only); devices then name "
        "themselves in the address (`telemetry/{tenant}/{device}`).",
    )
    registry_topic: str = _setting("iot.registry", "The registry's compacted topic.")
    login_check_s: float = _setting(
        2.0,
        "How often open connections are checked against the registry: a device or account "
        "disabled, deleted or re-keyed since its log-in is closed (amqp:unauthorized-access).",
    )
    tenant_quotas: str = _setting(
        "", "Static msgs/s quotas `tenant=rate,...` (the registry's win), as the bridge's."
    )
    mqtt_host: str = _setting("localhost", "Devices' commands: Mosquitto host.")
    mqtt_port: int = _setting(1883, "Devices' commands: Mosquitto port.")
    mqtt_username: str = _setting(
        "",
        "Devices' commands: MQTT user of the per-device sessions (a registry account with role "
        "`api`, `svc/<name>`).",
    )
    mqtt_password: str = _setting("", "MQTT password.", secret=True)
    mqtt_password_file: str = _setting(
        "", "File holding the MQTT password (first line; wins over mqtt_password)."
    )
    device_session_expiry_s: int = _setting(
        86400, "A device's MQTT session expiry (commands wait this long for the device)."
    )
    device_session_idle_s: float = _setting(
        120.0,
        "Close a device's MQTT connection this long after its command link and last reply "
        "(the session stays in Mosquitto).",
    )
    shutdown_timeout_s: float = _setting(5.0, "On SIGTERM: how long Kafka may take to flush.")
    log_level: str = _setting("INFO", "Logging level.")

    def __post_init__(self) -> None:
        checks = [
            (bool(self.amqp_host), "amqp_host must not be empty"),
            (0 <= self.amqp_port <= 65535, "amqp_port must be 0-65535"),
            (0 <= self.amqps_port <= 65535, "amqps_port must be 0-65535"),
            (
                bool(self.tls_cert_file) == bool(self.tls_key_file),
                "tls_cert_file and tls_key_file go together",
            ),
            (bool(self.tls_ca_dir), "tls_ca_dir must not be empty"),
            (
                self.amqps_port == 0 or self.amqps_port != self.amqp_port,
                "amqps_port must differ from amqp_port",
            ),
            (0 <= self.http_port <= 65535, "http_port must be 0-65535"),
            (bool(self.kafka_bootstrap), "kafka_bootstrap must not be empty"),
            (_ks.problem(self) is None, _ks.problem(self) or ""),
            (0 <= self.kafka_linger_ms <= 1000, "kafka_linger_ms must be 0-1000"),
            (self.kafka_consumer_stall_s > 0, "kafka_consumer_stall_s must be > 0"),
            (self.publish_timeout_ms >= 1, "publish_timeout_ms must be >= 1"),
            (bool(_TOPIC_RE.match(self.topic_telemetry)), "topic_telemetry is not a topic"),
            (bool(_TOPIC_RE.match(self.topic_events)), "topic_events is not a topic"),
            (bool(_TOPIC_RE.match(self.topic_dlq)), "topic_dlq is not a topic"),
            (bool(_TOPIC_RE.match(self.topic_commands)), "topic_commands is not a topic"),
            (bool(_TOPIC_RE.match(self.topic_command_replies)), "topic_command_replies: no topic"),
            (bool(_TOPIC_RE.match(self.topic_command_status)), "topic_command_status: no topic"),
            (1 <= self.north_max_links <= 10000, "north_max_links must be 1-10000"),
            (bool(_TOPIC_RE.match(self.registry_topic)), "registry_topic is not a topic"),
            (bool(_TOPIC_RE.match(self.queue_markers_topic)), "queue_markers_topic: no topic"),
            (bool(_TOPIC_RE.match(self.queue_settings_topic)), "queue_settings_topic: no topic"),
            (self.queue_visibility_s > 0, "queue_visibility_s must be > 0"),
            (self.queue_max_deliveries >= 1, "queue_max_deliveries must be >= 1"),
            (self.max_payload_bytes >= 1, "max_payload_bytes must be >= 1"),
            (
                self.max_message_bytes >= self.max_payload_bytes,
                "max_message_bytes must be >= max_payload_bytes",
            ),
            (1 <= self.link_credit <= 100000, "link_credit must be 1-100000"),
            (self.max_frame_bytes >= 512, "max_frame_bytes must be >= 512 (AMQP's minimum)"),
            (self.idle_timeout_s >= 0, "idle_timeout_s must be >= 0"),
            (self.login_check_s > 0, "login_check_s must be > 0"),
            (0 < self.mqtt_port <= 65535, "mqtt_port must be 1-65535"),
            (0 <= self.device_session_expiry_s <= 0xFFFFFFFF, "device_session_expiry_s range"),
            (self.device_session_idle_s > 0, "device_session_idle_s must be > 0"),
            (self.shutdown_timeout_s >= 0, "shutdown_timeout_s must be >= 0"),
            (self.log_level in appsettings.LOG_LEVELS, "log_level is not a level"),
        ]
        appsettings.check_all(checks, "amqp", ConfigError)

    def check_can_start(self) -> None:
        """Never anonymous by default: the registry, or the explicit dev flag."""
        if self.insecure_anonymous == self.registry_auth:
            raise ConfigError(
                "give exactly one of --registry-auth (SASL PLAIN against the registry) and, "
                "for development only, --insecure-anonymous"
            )

    def mqtt_secret(self) -> str:
        """The MQTT password: the file's first line, else ``mqtt_password``."""
        if self.mqtt_password_file:
            with open(self.mqtt_password_file, encoding="utf-8") as file:
                return file.readline().strip()
        return self.mqtt_password

    @classmethod
    def load(
        cls,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> AmqpConfig:
        return PARSER.load(argv, environ, **overrides)


PARSER = appsettings.SettingsParser(AmqpConfig, "amqp settings", ConfigError)
add_arguments = PARSER.add_arguments
from_namespace = PARSER.from_namespace
