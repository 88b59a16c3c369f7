"""The registry's one error root (pure)."""

from __future__ import annotations


class RegistryError(Exception):
    """Anything the registry refuses or cannot do; the message says why."""
