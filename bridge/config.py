"""The bridge's one configuration object.

Every setting is declared once, below, as a field of :class:`BridgeConfig` with its default and
help text. Its environment variable is ``IOT_`` + the field name in upper case (for example
``mqtt_host`` -> ``IOT_MQTT_HOST``, ``topic_telemetry`` -> ``IOT_TOPIC_TELEMETRY``) and its
command-line flag is ``--`` + the field name with dashes (``--mqtt-host``). Precedence:
defaults < environment < flags. The object is frozen and validated in ``__post_init__``.

The command path's settings (``commands/config.py``, ``CommandConfig``) extend these: it reaches
the same Mosquitto and Kafka with the same ``IOT_*`` settings, and adds its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from appconfig import kafka_security
from appconfig import settings as appsettings
from bridge.errors import ConfigError
from bridge.quota import parse_rates
from bridge.stores import parse_store_dirs

_LOG_LEVELS = appsettings.LOG_LEVELS
_LOG_FORMATS = ("auto", "json", "text")
_COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
_SHARE_GROUP_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_TOPIC_RE = appsettings.KAFKA_TOPIC_RE


_setting = appsettings.setting


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """All bridge settings. Build with :meth:`load` (defaults < ``IOT_*`` env < flags)."""

    describes: ClassVar[str] = "bridge"  # what the settings are of, for error messages

    # --- MQTT (device side) -------------------------------------------------------------------
    mqtt_host: str = _setting("localhost", "Mosquitto host name or address.")
    mqtt_port: int = _setting(1883, "Mosquitto TCP port.")
    mqtt_client_id: str = _setting(
        "iot-bridge",
        "MQTT client id. Keep it stable across restarts: the persistent session is tied to it.",
    )
    mqtt_session_expiry_s: int = _setting(
        86400,
        "MQTT 5 session expiry interval (seconds): how long Mosquitto keeps the bridge's session "
        "and queued messages while it is down.",
    )
    mqtt_receive_maximum: int = _setting(
        20000,
        "MQTT 5 Receive Maximum: unacknowledged QoS 1 messages Mosquitto may have in flight to "
        "the bridge (1-65535). Too low caps throughput because acks wait for Kafka.",
    )
    mqtt_share_group: str = _setting(
        "",
        "Shared subscription group: when set, subscribe to $share/<group>/devices/+/... so several "
        "bridge instances split the load (per-device order across instances is then not kept).",
    )
    mqtt_keepalive_s: int = _setting(30, "MQTT keepalive interval (seconds).")
    mqtt_username: str = _setting("", "MQTT user name (empty: no authentication).")
    mqtt_password: str = _setting("", "MQTT password.", secret=True)
    mqtt_password_file: str = _setting(
        "",
        "File holding the MQTT password (first line; wins over mqtt_password): keeps the secret "
        "out of the process environment and command line. `iot-stack` writes one (mode 0600).",
    )
    mqtt_reconnect_min_s: float = _setting(0.5, "First reconnect delay (seconds).")
    mqtt_reconnect_max_s: float = _setting(
        30.0, "Largest reconnect delay (seconds); the delay doubles up to it."
    )

    # --- Kafka ---------------------------------------------------------------------------------
    kafka_bootstrap: str = _setting("localhost:9092", "Kafka bootstrap servers (host:port,...).")
    kafka_linger_ms: int = _setting(
        25,
        "Producer linger.ms: how long librdkafka waits to fill a batch, and the longest a "
        "message waits when the adaptive linger's early send comes too late (25 kept the "
        "saturation rate of 50 and halved the half-load p99; see docs/bridge.md).",
    )
    kafka_batch_size: int = _setting(262144, "Producer batch.size (bytes) per partition batch.")
    kafka_adaptive_linger_ms: int = _setting(
        20,
        "Adaptive linger (bridge/flush.py): below kafka_adaptive_high_rate msgs/s the bridge "
        "sends a batch once its oldest message has waited from ~1 ms (at 2,000 msgs/s or less) "
        "up to this many ms (at the high rate) instead of the full kafka_linger_ms; 0 = off.",
    )
    kafka_adaptive_high_rate: int = _setting(
        40000,
        "Input rate (msgs/s) above which the adaptive linger stops cutting kafka_linger_ms "
        "short (saturation: full batches save Kafka's CPU).",
    )
    kafka_compression: str = _setting(
        "lz4", "Producer compression.type: none, gzip, snappy, lz4 or zstd."
    )
    kafka_message_timeout_ms: int = _setting(
        0,
        "Producer message.timeout.ms; 0 = retry forever (the bridge then waits for Kafka and "
        "applies back-pressure instead of dropping anything).",
    )
    kafka_socket_timeout_ms: int = _setting(
        15000,
        "Producer socket.timeout.ms: a request unanswered this long (a Kafka node hung or cut "
        "off without a reset) drops its connection and is retried on the partition's new "
        "leader; librdkafka's 60 s held a 3-node cluster's writes for 69 s after a node's cut.",
    )
    kafka_report_per_message: bool = _setting(
        False,
        "One Kafka delivery report per record, as before sparse reports. By default (with "
        "kafka_message_timeout_ms=0) the producer keeps the gap-less guarantee and only the "
        "last record of each Kafka partition in a socket read asks for a report, which covers "
        "the ones before it (bridge/pending.py). Always per record when a timeout is set.",
    )
    kafka_extra: str = _setting(
        "",
        "Extra librdkafka producer properties, comma-separated key=value pairs "
        "(e.g. security.protocol=SASL_SSL,sasl.mechanism=PLAIN).",
        secret=True,
    )

    kafka_security_protocol: str = _setting(
        "",
        "Kafka security.protocol: empty/PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (iot-stack's "
        "--kafka-security sasl_ssl sets SASL_SSL with SCRAM-SHA-512; docs/security.md).",
    )
    kafka_sasl_mechanism: str = _setting("SCRAM-SHA-512", "Kafka sasl.mechanism.")
    kafka_sasl_username: str = _setting("", "Kafka SASL user name (the service's principal).")
    kafka_sasl_password_file: str = _setting(
        "", "File holding the Kafka SASL password (first line; mode 0600, never in the env)."
    )
    kafka_ssl_ca_file: str = _setting(
        "", "CA certificate (PEM) Kafka's TLS listener is checked by."
    )

    # --- Kafka topics --------------------------------------------------------------------------
    topic_telemetry: str = _setting("iot.telemetry", "Kafka topic for telemetry.")
    topic_events: str = _setting("iot.events", "Kafka topic for device events.")
    topic_dlq: str = _setting("iot.dlq", "Kafka topic for rejected device input.")
    topic_presence: str = _setting("iot.presence", "Kafka topic (compacted) for presence.")
    # --- Tenants (docs/security.md) --------------------------------------------------------------
    registry_topic: str = _setting(
        "",
        "The registry's compacted Kafka topic (iot.registry) to read tenants and their msgs/s "
        "quotas from; empty: no registry (only tenant_quotas apply).",
    )
    mqtt_auth_metrics_file: str = _setting(
        "",
        "The JSON file Mosquitto's metrics plugin writes (refused log-ins and publishes per user "
        "name; iot-stack sets it for the first bridge); exported per tenant. Empty: none.",
    )
    store_dirs: str = _setting(
        "",
        "Data dirs on this host whose free space /metrics exports, name=path,... "
        "(iot_bridge_store_free_bytes, iot_bridge_store_full; iot-stack sets Kafka's and "
        "Mosquitto's for the first bridge, and the console's Overview shows a full one). "
        "Empty: none.",
    )
    tenant_quotas: str = _setting(
        "",
        "Static per-tenant message-rate quotas, tenant=msgs_per_s,...; the registry's quota "
        "wins for a tenant it knows.",
    )
    tenant_refresh_s: float = _setting(
        5.0, "How often (seconds) the bridge re-reads the registry's tenants and quotas."
    )

    # --- Limits and back-pressure --------------------------------------------------------------
    max_payload_bytes: int = _setting(
        65536, "Largest accepted MQTT payload (bytes); larger ones go to the DLQ."
    )
    pending_max_messages: int = _setting(
        40000,
        "Back-pressure bound: messages received but not yet confirmed by Kafka. At the bound "
        "the bridge stops reading from Mosquitto.",
    )
    pending_max_bytes: int = _setting(
        64 * 1024 * 1024, "Back-pressure bound on the payload bytes of pending messages."
    )
    shutdown_timeout_s: float = _setting(
        15.0, "On SIGTERM/SIGINT: how long to wait for Kafka to confirm pending messages."
    )

    # --- Observability -------------------------------------------------------------------------
    http_host: str = _setting("127.0.0.1", "Address of the metrics/health HTTP endpoint.")
    http_port: int = _setting(
        9108,
        "Port of the metrics (/metrics) and health (/healthz, /readyz) endpoint; 0 = pick a free "
        "port (logged at start-up).",
    )
    log_level: str = _setting("INFO", "Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    log_format: str = _setting(
        "auto", "Log format: json, text, or auto (text on a terminal, JSON lines otherwise)."
    )

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ConfigError(f"invalid {self.describes} configuration: " + "; ".join(problems))

    def problems(self) -> list[str]:
        """What is wrong with these settings (empty: nothing). A config that extends this one
        (the command path's, ``commands/config.py``) adds its own checks to these."""
        problems: list[str] = []

        def need(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        need(bool(self.mqtt_host), "mqtt_host must not be empty")
        security = kafka_security.check(
            self.kafka_security_protocol, self.kafka_sasl_mechanism,
            self.kafka_sasl_username, self.kafka_sasl_password_file,
        )  # fmt: skip
        need(security is None, security or "")
        need(1 <= self.mqtt_port <= 65535, "mqtt_port must be 1-65535")
        need(
            0 < len(self.mqtt_client_id) <= 128 and self.mqtt_client_id.isprintable(),
            "mqtt_client_id must be 1-128 printable characters",
        )
        need(0 <= self.mqtt_session_expiry_s <= 0xFFFFFFFF, "mqtt_session_expiry_s out of range")
        need(1 <= self.mqtt_receive_maximum <= 65535, "mqtt_receive_maximum must be 1-65535")
        need(
            self.mqtt_share_group == "" or bool(_SHARE_GROUP_RE.match(self.mqtt_share_group)),
            "mqtt_share_group may only contain letters, digits and _.:-",
        )
        need(0 <= self.mqtt_keepalive_s <= 65535, "mqtt_keepalive_s must be 0-65535")
        need(
            0 < self.mqtt_reconnect_min_s <= self.mqtt_reconnect_max_s,
            "need 0 < mqtt_reconnect_min_s <= mqtt_reconnect_max_s",
        )
        need(bool(self.kafka_bootstrap), "kafka_bootstrap must not be empty")
        need(0 <= self.kafka_linger_ms <= 900000, "kafka_linger_ms must be 0-900000")
        need(1 <= self.kafka_batch_size <= 2147483647, "kafka_batch_size must be positive")
        need(
            0 <= self.kafka_adaptive_linger_ms <= 60000, "kafka_adaptive_linger_ms must be 0-60000"
        )
        need(self.kafka_adaptive_high_rate > 2000, "kafka_adaptive_high_rate must be > 2000")
        need(self.kafka_compression in _COMPRESSIONS, f"kafka_compression must be {_COMPRESSIONS}")
        need(self.kafka_message_timeout_ms >= 0, "kafka_message_timeout_ms must be >= 0")
        need(
            1000 <= self.kafka_socket_timeout_ms <= 300000,
            "kafka_socket_timeout_ms must be 1000-300000",
        )
        try:
            parse_kafka_extra(self.kafka_extra)
        except ConfigError as exc:
            need(False, str(exc))
        for name in (
            "topic_telemetry",
            "topic_events",
            "topic_dlq",
            "topic_presence",
        ):
            need(bool(_TOPIC_RE.match(getattr(self, name))), f"{name} is not a valid Kafka topic")
        need(
            self.registry_topic == "" or bool(_TOPIC_RE.match(self.registry_topic)),
            "registry_topic is not a valid Kafka topic",
        )
        try:
            parse_rates(self.tenant_quotas)
        except ValueError as exc:
            need(False, f"tenant_quotas: {exc}")
        try:
            parse_store_dirs(self.store_dirs)
        except ValueError as exc:
            need(False, f"store_dirs: {exc}")
        need(self.tenant_refresh_s > 0, "tenant_refresh_s must be > 0")
        need(self.max_payload_bytes >= 1, "max_payload_bytes must be >= 1")
        need(self.pending_max_messages >= 1, "pending_max_messages must be >= 1")
        need(
            self.pending_max_bytes >= self.max_payload_bytes,
            "pending_max_bytes must be >= max_payload_bytes",
        )
        need(self.shutdown_timeout_s >= 0, "shutdown_timeout_s must be >= 0")
        need(0 <= self.http_port <= 65535, "http_port must be 0-65535")
        need(self.log_level in _LOG_LEVELS, f"log_level must be one of {_LOG_LEVELS}")
        need(self.log_format in _LOG_FORMATS, f"log_format must be one of {_LOG_FORMATS}")
        return problems

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Self:
        """Defaults < ``IOT_*`` environment < ``argv`` flags < keyword ``overrides``."""
        # cls, not PARSER: CommandConfig (commands/config.py) loads through this too
        return appsettings.SettingsParser(cls, "settings", ConfigError).load(
            argv, environ, **overrides
        )

    def with_changes(self, **changes: Any) -> Self:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def redacted(self) -> dict[str, Any]:
        """The settings as a dict with secrets hidden, for logs."""
        return appsettings.redacted(self)

    @property
    def mqtt_subscriptions(self) -> tuple[str, ...]:
        """The MQTT topic filters the telemetry path subscribes to."""
        filters = (
            "devices/+/telemetry",
            "devices/+/events",
            "devices/+/status",
            "tenants/+/devices/+/telemetry",
            "tenants/+/devices/+/events",
            "tenants/+/devices/+/status",
        )
        if self.mqtt_share_group:
            return tuple(f"$share/{self.mqtt_share_group}/{f}" for f in filters)
        return filters


def kafka_client_security(config: BridgeConfig) -> dict[str, str]:
    """librdkafka's security settings from the typed ``kafka_security_*``/``kafka_sasl_*``
    settings (the password read from its file), then ``kafka_extra``'s own ones on top."""
    try:
        conf = kafka_security.client_security(
            config.kafka_security_protocol, config.kafka_sasl_mechanism,
            config.kafka_sasl_username, config.kafka_sasl_password_file,
            config.kafka_ssl_ca_file,
        )  # fmt: skip
    except OSError as exc:
        raise ConfigError(f"kafka_sasl_password_file: {exc}") from exc
    extra = parse_kafka_extra(config.kafka_extra)
    return conf | {k: v for k, v in extra.items() if k.startswith(("security", "sasl", "ssl"))}


def settings() -> tuple[dataclasses.Field[Any], ...]:
    """Every setting (dataclass field) in declaration order."""
    return dataclasses.fields(BridgeConfig)


def parse_kafka_extra(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}``."""
    out: dict[str, str] = {}
    for raw_item in text.split(","):
        item = raw_item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"kafka_extra: expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


PARSER = appsettings.SettingsParser(BridgeConfig, "bridge settings", ConfigError)
add_arguments = PARSER.add_arguments
from_namespace = PARSER.from_namespace
env_name = appsettings.env_name  # the environment variable of a setting
