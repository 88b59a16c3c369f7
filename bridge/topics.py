"""Device-side MQTT topic names: parsing and validation (pure, no client imports).

Tenants (docs/security.md): the default tenant keeps ``devices/{id}/{channel}``; tenant ``t``'s
devices publish on ``tenants/{t}/devices/{id}/{channel}``. Mosquitto's ACL ties that root to the
device's credentials, so the tenant read here from the topic is the one its login proved.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

DEVICE_ID_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# registry.ids.TENANT_RE (kept equal by a test); "default" has no tenants/ root
TENANT_RE: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
DEFAULT_TENANT: Final = "default"


class Channel(StrEnum):
    """The device->cloud channels the telemetry path handles."""

    TELEMETRY = "telemetry"
    EVENTS = "events"
    STATUS = "status"


_CHANNELS: Final = {c.value: c for c in Channel}


def is_valid_device_id(device_id: str) -> bool:
    """True if ``device_id`` matches ``[A-Za-z0-9_.:-]{1,128}``."""
    return DEVICE_ID_RE.fullmatch(device_id) is not None


def parse_device_topic(topic: str) -> tuple[str, Channel] | None:
    """``devices/{device_id}/{channel}`` -> ``(device_id, channel)``; None if not one of ours.

    Accepts exactly three levels, a valid device id and a known channel.
    """
    parts = topic.split("/")
    if len(parts) != 3 or parts[0] != "devices":
        return None
    device_id = parts[1]
    channel = _CHANNELS.get(parts[2])
    if channel is None or DEVICE_ID_RE.fullmatch(device_id) is None:
        return None
    return device_id, channel


def parse_tenant_topic(topic: str) -> tuple[str, str, Channel] | None:
    """``devices/{id}/{ch}`` -> ``("default", id, ch)``; ``tenants/{t}/devices/{id}/{ch}`` ->
    ``(t, id, ch)``; None if neither (``tenants/default/...`` too: one spelling per device)."""
    if not topic.startswith("tenants/"):
        parsed = parse_device_topic(topic)
        return None if parsed is None else (DEFAULT_TENANT, parsed[0], parsed[1])
    parts = topic.split("/")
    if len(parts) != 5 or parts[2] != "devices":
        return None
    tenant, device_id = parts[1], parts[3]
    channel = _CHANNELS.get(parts[4])
    if (
        channel is None
        or tenant == DEFAULT_TENANT
        or TENANT_RE.fullmatch(tenant) is None
        or DEVICE_ID_RE.fullmatch(device_id) is None
    ):
        return None
    return tenant, device_id, channel


ParsedTopic = tuple[str, Channel, bytes, bytes, str]
_CACHE: dict[str, ParsedTopic | None] = {}
_CACHE_MAX: Final = 200_000


def parse_device_topic_cached(topic: str) -> ParsedTopic | None:
    """:func:`parse_tenant_topic` as ``(device id, channel, encoded id, encoded topic, tenant)``,
    memoised (hot path)."""
    try:
        return _CACHE[topic]
    except KeyError:
        pass
    parsed = parse_tenant_topic(topic)
    out = (
        None
        if parsed is None
        else (parsed[1], parsed[2], parsed[1].encode(), topic.encode(), parsed[0])
    )
    if len(_CACHE) < _CACHE_MAX:
        _CACHE[topic] = out
    return out


def device_id_hint(topic: str) -> str | None:
    """Best-effort device id of a topic we rejected (for the DLQ key): the second level if valid."""
    parts = topic.split("/")
    if parts[0] == "tenants" and len(parts) >= 4 and parts[2] == "devices":
        parts = parts[2:]
    if len(parts) >= 2 and parts[0] == "devices" and DEVICE_ID_RE.fullmatch(parts[1]):
        return parts[1]
    return None


def tenant_kafka_topic(base: str, tenant: str) -> str:
    """Tenant ``t``'s copy of a Kafka topic: ``.{t}`` after the first name segment
    (``iot.telemetry`` -> ``iot.t.telemetry``, as Hono's ``hono.telemetry.{t}`` keeps tenants
    apart); the default tenant keeps ``base`` itself."""
    if tenant == DEFAULT_TENANT:
        return base
    head, dot, tail = base.partition(".")
    return f"{head}.{tenant}.{tail}" if dot else f"{base}.{tenant}"


def tenant_mqtt_root(tenant: str) -> str:
    """The MQTT topic prefix of ``tenant`` (``""`` for the default, ``tenants/{t}/`` else)."""
    return "" if tenant == DEFAULT_TENANT else f"tenants/{tenant}/"


def device_topic(device_id: str, channel: Channel | str) -> str:
    """The MQTT topic of a device channel."""
    return f"devices/{device_id}/{channel}"
