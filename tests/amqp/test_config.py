from __future__ import annotations

import pytest

from amqp.config import AmqpConfig
from amqp.errors import ConfigError


def test_defaults_environment_and_flags() -> None:
    cfg = AmqpConfig.load([], environ={})
    assert (cfg.amqp_port, cfg.max_message_bytes, cfg.link_credit) == (5672, 1048576, 1000)
    cfg = AmqpConfig.load(
        ["--amqp-port", "5673"], environ={"IOT_AMQP_PORT": "1", "IOT_LINK_CREDIT": "5"}
    )
    assert (cfg.amqp_port, cfg.link_credit) == (5673, 5)


def test_never_anonymous_by_default() -> None:
    with pytest.raises(ConfigError, match="registry-auth"):
        AmqpConfig.load([], environ={}).check_can_start()
    with pytest.raises(ConfigError):
        AmqpConfig.load(
            [], environ={}, registry_auth=True, insecure_anonymous=True
        ).check_can_start()
    AmqpConfig.load([], environ={}, registry_auth=True).check_can_start()
    AmqpConfig.load([], environ={}, insecure_anonymous=True).check_can_start()


def test_checks() -> None:
    with pytest.raises(ConfigError, match="max_message_bytes"):
        AmqpConfig.load([], environ={}, max_message_bytes=10)
    with pytest.raises(ConfigError, match="link_credit"):
        AmqpConfig.load([], environ={}, link_credit=0)


def test_amqps_defaults_and_checks() -> None:
    cfg = AmqpConfig.load([], environ={})
    assert (cfg.amqps_port, cfg.tls_ca_dir) == (5671, "var/ca")  # TLS on by default
    assert AmqpConfig.load(["--amqps-port", "0"], environ={}).amqps_port == 0  # off
    with pytest.raises(ConfigError, match="go together"):
        AmqpConfig.load([], environ={}, tls_cert_file="x.crt")
    with pytest.raises(ConfigError, match="differ"):
        AmqpConfig.load([], environ={}, amqp_port=5671)
