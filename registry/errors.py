"""The registry's one error root (pure)."""

from __future__ import annotations


class RegistryError(Exception):
    """Anything the registry refuses or cannot do; the message says why."""


class NotFoundError(RegistryError):
    """No such tenant, device or account."""


class ConflictError(RegistryError):
    """It exists already, is still in use, or would break a quota."""


class ForbiddenError(RegistryError):
    """The actor's roles do not allow it."""


class MosquittoOutOfStepError(RegistryError):
    """Kafka has the change, Mosquitto does not (yet)."""
