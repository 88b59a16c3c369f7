"""A process's Kafka client security: the clients' base and Spark's options (issue 33)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from appconfig import kafka_security as ks


@dataclass(frozen=True)
class _Cfg:
    kafka_security_protocol: str = "SASL_SSL"
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"
    kafka_sasl_username: str = "api"
    kafka_sasl_password_file: str = ""
    kafka_ssl_ca_file: str = "/ca/ca.crt"


@pytest.fixture(autouse=True)
def _plaintext_after() -> Iterator[None]:
    yield
    ks.use({})


def test_a_service_sets_its_clients_security_once(tmp_path: Path) -> None:
    secret = tmp_path / "api.secret"
    secret.write_text("pw\n")
    ks.use_config(_Cfg(kafka_sasl_password_file=str(secret)), ValueError)
    assert ks.client_base("k:9092") == {
        "bootstrap.servers": "k:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "api",
        "sasl.password": "pw",
        "ssl.ca.location": "/ca/ca.crt",
    }
    opts = ks.spark_options(ks.client_defaults())
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert opts["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="api" password="pw";'
    )
    assert opts["kafka.ssl.truststore.location"] == "/ca/ca.crt"


def test_a_missing_password_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kafka_sasl_password_file"):
        ks.use_config(_Cfg(kafka_sasl_password_file=str(tmp_path / "none")), ValueError)


def test_plaintext_adds_nothing() -> None:
    assert ks.client_base("k:9092") == {"bootstrap.servers": "k:9092"}
    assert ks.spark_options({}) == {}
    assert ks.problem(_Cfg(kafka_security_protocol="")) is None
    assert ks.problem(_Cfg()) is not None  # SASL without a password file
