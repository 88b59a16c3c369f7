"""iot-amqp's Prometheus metrics (adapter: prometheus_client)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class AmqpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.connections = Gauge(
            "iot_amqp_connections", "AMQP connections open now", registry=registry
        )
        self.logins = Counter(
            "iot_amqp_logins",
            "SASL log-ins by verdict (ok, refused, unavailable; tls_refused: the TLS handshake)",
            ["verdict"], registry=registry,
        )  # fmt: skip
        self.messages = Counter(
            "iot_amqp_messages",
            "Device uploads by channel and outcome (accepted, released, or the condition of a "
            "rejection)",
            ["channel", "outcome"],
            registry=registry,
        )
        self.refused_links = Counter(
            "iot_amqp_refused_links", "Link attaches refused, by condition", ["condition"],
            registry=registry,
        )  # fmt: skip
        self.presettled_events = Counter(
            "iot_amqp_presettled_events",
            "Events sent pre-settled (at most once; Hono refuses them, iot-amqp counts them)",
            registry=registry,
        )
        self.command_links = Gauge(
            "iot_amqp_command_links", "Devices' command links attached now", registry=registry
        )
        self.commands = Counter(
            "iot_amqp_commands",
            "Commands to devices by outcome (sent, accepted, rejected, released)",
            ["outcome"],
            registry=registry,
        )
        self.north_links = Gauge(
            "iot_amqp_north_links", "Applications' telemetry/event links now", registry=registry
        )
        self.north_messages = Counter(
            "iot_amqp_north_messages",
            "Records sent to applications and their outcomes (sent, accepted, rejected, "
            "released), by channel",
            ["channel", "outcome"],
            registry=registry,
        )
        self.north_commands = Counter(
            "iot_amqp_north_commands",
            "Applications' commands (accepted, released, or the condition of a rejection) and "
            "their replies (reply_sent, reply_dropped)",
            ["outcome"],
            registry=registry,
        )
        self.replies = Counter(
            "iot_amqp_replies",
            "Devices' command replies by outcome (accepted: Mosquitto took it; released)",
            ["outcome"],
            registry=registry,
        )
