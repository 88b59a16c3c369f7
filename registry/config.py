"""Settings of ``iot-devices``: flags over ``IOT_*`` environment over defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import RegistryError
from registry.kafka_store import AUDIT_TOPIC, REGISTRY_TOPIC


@dataclass(frozen=True)
class RegistryConfig:
    kafka_bootstrap: str
    topic: str
    audit_topic: str
    mqtt_host: str
    mqtt_port: int
    admin_password_file: Path | None
    ca_dir: Path = Path("var/ca")
    mqtt_shard_ports: str = ""
    # librdkafka's security settings (a SASL_SSL Kafka, docs/security.md); {} = plaintext
    kafka_security: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RegistryConfig:
        password_file = args.admin_password_file
        return cls(
            kafka_bootstrap=args.kafka_bootstrap,
            topic=args.topic,
            audit_topic=args.audit_topic,
            mqtt_host=args.mqtt_host,
            mqtt_port=args.mqtt_port,
            admin_password_file=Path(password_file) if password_file else None,
            ca_dir=Path(args.ca_dir),
            mqtt_shard_ports=args.mqtt_shard_ports,
            kafka_security=_kafka_security(args),
        )


def _kafka_security(args: argparse.Namespace) -> dict[str, str]:
    """The IOT_KAFKA_SECURITY_PROTOCOL/SASL_*/SSL_CA_FILE settings the services read
    (appconfig.kafka_security, which this package may not import), the password from its file."""
    protocol = (args.kafka_security_protocol or "").upper()
    if protocol in ("", "PLAINTEXT"):
        return {}
    conf = {"security.protocol": protocol}
    if protocol.startswith("SASL"):
        try:
            lines = Path(args.kafka_sasl_password_file).read_text().splitlines()
        except OSError as exc:  # a one-line error, not a traceback (the CLI prints it)
            raise RegistryError(f"kafka_sasl_password_file: {exc}") from exc
        conf |= {
            "sasl.mechanism": args.kafka_sasl_mechanism.upper(),
            "sasl.username": args.kafka_sasl_username,
            "sasl.password": lines[0].strip() if lines else "",
        }
    if args.kafka_ssl_ca_file:
        conf["ssl.ca.location"] = args.kafka_ssl_ca_file
    return conf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--kafka-bootstrap",
        default=env("IOT_KAFKA_BOOTSTRAP", "localhost:9092"),
        help="Kafka bootstrap servers (env IOT_KAFKA_BOOTSTRAP).",
    )
    for name, default, what in (
        ("protocol", "", "Kafka security.protocol: PLAINTEXT (empty) or SASL_SSL"),
        ("sasl-mechanism", "SCRAM-SHA-512", "Kafka sasl.mechanism"),
        ("sasl-username", "", "Kafka SASL user name"),
        ("sasl-password-file", "", "file holding the Kafka SASL password (first line)"),
        ("ssl-ca-file", "", "CA certificate (PEM) Kafka's TLS listener is checked by"),
    ):
        flag = name if name.startswith(("sasl", "ssl")) else f"security-{name}"
        var = "IOT_KAFKA_" + flag.upper().replace("-", "_")
        parser.add_argument(
            f"--kafka-{flag}", default=env(var, default), help=f"{what} (env {var})."
        )
    parser.add_argument(
        "--topic",
        default=env("IOT_REGISTRY_TOPIC", REGISTRY_TOPIC),
        help="Compacted registry topic (env IOT_REGISTRY_TOPIC).",
    )
    parser.add_argument(
        "--audit-topic",
        default=env("IOT_REGISTRY_AUDIT_TOPIC", AUDIT_TOPIC),
        help="Audit topic (env IOT_REGISTRY_AUDIT_TOPIC).",
    )
    parser.add_argument(
        "--mqtt-host",
        default=env("IOT_MQTT_HOST", "localhost"),
        help="Mosquitto host for dynamic-security changes (env IOT_MQTT_HOST).",
    )
    parser.add_argument(
        "--mqtt-port",
        type=int,
        default=int(env("IOT_MQTT_PORT", "1883")),
        help="Mosquitto port (env IOT_MQTT_PORT).",
    )
    parser.add_argument(
        "--mqtt-shard-ports",
        default=env("IOT_REGISTRY_MQTT_SHARD_PORTS", ""),
        help="With `iot-stack up --mqtt-shards N`: the shards' own ports, comma separated "
        "(MQTT port + 1 .. + N); every change then goes to each shard "
        "(env IOT_REGISTRY_MQTT_SHARD_PORTS).",
    )
    parser.add_argument(
        "--admin-password-file",
        default=env("IOT_REGISTRY_ADMIN_PASSWORD_FILE", ""),
        help="File holding the password of Mosquitto's svc/registry admin client; without it "
        "changes are saved in the registry only, not applied to Mosquitto "
        "(env IOT_REGISTRY_ADMIN_PASSWORD_FILE).",
    )
    parser.add_argument(
        "--ca-dir",
        default=env("IOT_REGISTRY_CA_DIR", "var/ca"),
        help="Directory of the appliance CA, the TLS listener's certificate, the issued "
        "certificates' index and the CRL (env IOT_REGISTRY_CA_DIR).",
    )
