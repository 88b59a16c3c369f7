"""Identifiers of registry entities and their validation (pure).

Device ids follow the topic contract (design.md, ``[A-Za-z0-9_.:-]{1,128}``; the same pattern
as bridge.topics, checked by a test: registry imports no bridge module, so the bridge can use
registry's tenant-aware topics next without an import cycle). Tenant,
group and account names are narrower because they also appear in MQTT user names, dynsec role
names and (next phase) Kafka topic names, whose legal characters are ``[A-Za-z0-9._-]``.
"""

from __future__ import annotations

import re
from typing import Final

from registry.errors import RegistryError

DEFAULT_TENANT: Final = "default"

DEVICE_ID_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
TENANT_RE: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
GROUP_RE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
ACCOUNT_RE: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


class InvalidIdError(RegistryError, ValueError):
    """An identifier that does not match its pattern."""


def _check(kind: str, value: str, pattern: re.Pattern[str], shape: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidIdError(f"invalid {kind} {value!r}: must match {shape}")
    return value


def tenant_id(value: str) -> str:
    return _check("tenant id", value, TENANT_RE, "[a-z0-9][a-z0-9-]{0,31}")


def device_id(value: str) -> str:
    return _check("device id", value, DEVICE_ID_RE, "[A-Za-z0-9_.:-]{1,128}")


def group_name(value: str) -> str:
    return _check("group name", value, GROUP_RE, "[A-Za-z0-9_.-]{1,64}")


def account_name(value: str) -> str:
    return _check("account name", value, ACCOUNT_RE, "[a-z0-9][a-z0-9_.-]{0,63}")


def device_key(tenant: str, device: str) -> str:
    """A device's registry-wide identity: ``tenant/device`` (device ids repeat across tenants)."""
    return f"{tenant}/{device}"


def split_device_key(key: str) -> tuple[str, str]:
    tenant, sep, device = key.partition("/")
    if not sep:
        raise InvalidIdError(f"invalid device key {key!r}: expected tenant/device")
    return tenant_id(tenant), device_id(device)
