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
