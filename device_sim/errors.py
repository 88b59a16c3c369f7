"""The simulator's error hierarchy: one root, :class:`SimError`."""

from __future__ import annotations


class SimError(Exception):
    """Root of every error the simulator raises."""


class SimConfigError(SimError, ValueError):
    """An option is missing, malformed or out of range (a usage error: exit 2)."""


class ManifestError(SimError):
    """A run manifest cannot be found, read or understood."""


class VerifyError(SimError):
    """The verifier could not read what it needs from Kafka (a runtime error: exit 1)."""
