"""The bridge's typed Kafka security settings reach its producer and consumers (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import BridgeConfig, ConfigError
from bridge.kafka_settings import consumer_security, producer_config


def test_sasl_settings_reach_producer_and_consumers(tmp_path: Path) -> None:
    secret = tmp_path / "kafka.secret"
    secret.write_text("pw\n")
    cfg = BridgeConfig(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_username="bridge",
        kafka_sasl_password_file=str(secret),
        kafka_ssl_ca_file="/ca.crt",
    )
    expected = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bridge",
        "sasl.password": "pw",
        "ssl.ca.location": "/ca.crt",
    }
    assert consumer_security(cfg) == expected
    assert expected.items() <= producer_config(cfg).items()
    assert consumer_security(BridgeConfig()) == {}


def test_sasl_without_a_password_file_is_refused() -> None:
    with pytest.raises(ConfigError, match="kafka_sasl_password_file"):
        BridgeConfig(kafka_security_protocol="SASL_SSL", kafka_sasl_username="bridge")
