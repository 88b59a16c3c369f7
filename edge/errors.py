"""The edge package's one error root."""

from __future__ import annotations


class EdgeError(Exception):
    """Anything iot-edge cannot do (bad config, broker will not start, ...)."""


class ConfigError(EdgeError, ValueError):
    """A site configuration that breaks a rule."""
