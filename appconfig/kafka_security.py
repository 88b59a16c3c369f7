"""A Kafka client's security settings, shared by the services' typed configs (pure; issue 33).

With ``iot-stack up --kafka-security sasl_ssl`` (docs/security.md) each service reaches Kafka as
its own SCRAM principal over TLS. It reads ``IOT_KAFKA_SECURITY_PROTOCOL``,
``IOT_KAFKA_SASL_MECHANISM``, ``IOT_KAFKA_SASL_USERNAME``, ``IOT_KAFKA_SASL_PASSWORD_FILE`` (the
secret stays in its 0600 file: off the environment and the command line) and
``IOT_KAFKA_SSL_CA_FILE`` as settings of its config; :func:`client_security` turns them into
librdkafka's properties. Reading the password file is the only I/O.
"""

from __future__ import annotations

from pathlib import Path

PROTOCOLS = ("", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


def check(protocol: str, mechanism: str, username: str, password_file: str) -> str | None:
    """What is wrong with these settings, or None."""
    if protocol.upper() not in PROTOCOLS:
        return f"kafka_security_protocol must be one of {', '.join(PROTOCOLS[1:])}"
    if protocol.upper().startswith("SASL"):
        if mechanism.upper() not in MECHANISMS:
            return f"kafka_sasl_mechanism must be one of {', '.join(MECHANISMS)}"
        if not (username and password_file):
            return f"{protocol} needs kafka_sasl_username and kafka_sasl_password_file"
    return None


def client_security(
    protocol: str, mechanism: str, username: str, password_file: str, ca_file: str
) -> dict[str, str]:
    """librdkafka's ``security.protocol``, ``sasl.*`` and ``ssl.ca.location`` ({} = plaintext).

    Raises OSError when the password file cannot be read."""
    proto = protocol.upper()
    if proto in ("", "PLAINTEXT"):
        return {}
    conf = {"security.protocol": proto}
    if proto.startswith("SASL"):
        lines = Path(password_file).read_text().splitlines()
        conf |= {
            "sasl.mechanism": mechanism.upper(),
            "sasl.username": username,
            "sasl.password": lines[0].strip() if lines else "",
        }
    if ca_file and proto.endswith("SSL"):
        conf["ssl.ca.location"] = ca_file
    return conf


# The settings' help texts, one copy for every service config that declares them.
HELP = {
    "kafka_security_protocol": (
        "Kafka security.protocol: empty/PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (iot-stack's "
        "--kafka-security sasl_ssl sets SASL_SSL with SCRAM-SHA-512; docs/security.md)."
    ),
    "kafka_sasl_mechanism": "Kafka sasl.mechanism.",
    "kafka_sasl_username": "Kafka SASL user name (the service's principal).",
    "kafka_sasl_password_file": (
        "File holding the Kafka SASL password (first line; mode 0600, never in the env)."
    ),
    "kafka_ssl_ca_file": "CA certificate (PEM) Kafka's TLS listener is checked by.",
}

# A service's clients are many (iot-api has a score of them, in every room): the service sets
# its security once at start (`use`) and each client starts from `client_base`.
_CLIENT: dict[str, str] = {}


def from_config(config: object) -> dict[str, str]:
    """:func:`client_security` of a config that declares the settings of :data:`HELP`."""
    protocol, mechanism, username, password_file, ca_file = (
        str(getattr(config, name)) for name in HELP
    )
    return client_security(protocol, mechanism, username, password_file, ca_file)


def problem(config: object) -> str | None:
    """:func:`check` of such a config."""
    protocol, mechanism, username, password_file = (
        str(getattr(config, name)) for name in list(HELP)[:4]
    )
    return check(protocol, mechanism, username, password_file)


def use(security: dict[str, str]) -> None:
    """This process's Kafka clients' security settings (a service calls it once at start)."""
    _CLIENT.clear()
    _CLIENT.update(security)


def use_config(config: object, error: type[Exception]) -> None:
    """:func:`use` the settings of ``config`` (a service's CLI, once it has its config)."""
    try:
        use(from_config(config))
    except OSError as exc:
        raise error(f"kafka_sasl_password_file: {exc}") from exc


def client_defaults() -> dict[str, str]:
    return dict(_CLIENT)


def client_base(bootstrap: str) -> dict[str, str]:
    """A client's first settings: the bootstrap servers and this process's security."""
    return {"bootstrap.servers": bootstrap, **_CLIENT}


def spark_options(security: dict[str, str]) -> dict[str, str]:
    """The Spark Kafka source's ``kafka.*`` options for the same settings (Java client)."""
    if not security:
        return {}
    opts = {"kafka.security.protocol": security["security.protocol"]}
    if "sasl.mechanism" in security:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if security["sasl.mechanism"] == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        opts["kafka.sasl.mechanism"] = security["sasl.mechanism"]
        opts["kafka.sasl.jaas.config"] = (
            f'{module} required username="{security["sasl.username"]}" '
            f'password="{security["sasl.password"]}";'
        )
    if "ssl.ca.location" in security:
        opts["kafka.ssl.truststore.type"] = "PEM"
        opts["kafka.ssl.truststore.location"] = security["ssl.ca.location"]
    return opts


def delivery_timeouts(message_timeout_ms: int) -> dict[str, int]:
    """A producer's ``message.timeout.ms`` with a ``socket.timeout.ms`` a third of it.

    librdkafka bounds a ProduceRequest in flight by the lesser of ``socket.timeout.ms`` (60 s)
    and the message's time left (``request.timeout.ms`` is the broker's ack timeout, never
    enforced by the client). So a request sent to a leader that went silent (a hung or cut-off
    broker: no RST) waited out the whole message time and failed, although two of three nodes
    served (tests/api/plumbing/test_kafka_health_silent_node.py). A third of it times the request
    out in time to drop the connection, learn the new leader and retry within the message's time.
    """
    return {
        "message.timeout.ms": message_timeout_ms,
        "socket.timeout.ms": max(5000, min(60000, message_timeout_ms // 3)),
    }
