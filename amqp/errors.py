"""The one error root of iot-amqp."""

from __future__ import annotations


class AmqpError(Exception):
    """Root of iot-amqp's errors."""


class ConfigError(AmqpError):
    """A setting is invalid, or the service cannot start as configured."""


class SaslError(AmqpError):
    """The peer's SASL frames are not what the protocol allows."""
