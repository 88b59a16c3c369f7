"""The bridge's error hierarchy: one root, :class:`BridgeError`."""

from __future__ import annotations


class BridgeError(Exception):
    """Root of every error the bridge raises."""


class ConfigError(BridgeError, ValueError):
    """A setting is missing, malformed or out of range (a usage error: exit 2)."""


class FatalKafkaError(BridgeError):
    """Kafka refused us for good (authorization, missing topic, fatal producer error): exit 1."""
