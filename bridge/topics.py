"""Device-side MQTT topic names: parsing and validation (pure, no client imports)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

DEVICE_ID_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


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


_CACHE: dict[str, tuple[str, Channel, bytes, bytes] | None] = {}
_CACHE_MAX: Final = 200_000


def parse_device_topic_cached(topic: str) -> tuple[str, Channel, bytes, bytes] | None:
    """:func:`parse_device_topic` plus the encoded device id and topic, memoised (hot path)."""
    try:
        return _CACHE[topic]
    except KeyError:
        pass
    parsed = parse_device_topic(topic)
    out = None if parsed is None else (parsed[0], parsed[1], parsed[0].encode(), topic.encode())
    if len(_CACHE) < _CACHE_MAX:
        _CACHE[topic] = out
    return out


def device_id_hint(topic: str) -> str | None:
    """Best-effort device id of a topic we rejected (for the DLQ key): the second level if valid."""
    parts = topic.split("/")
    if len(parts) >= 2 and parts[0] == "devices" and DEVICE_ID_RE.fullmatch(parts[1]):
        return parts[1]
    return None


def device_topic(device_id: str, channel: Channel | str) -> str:
    """The MQTT topic of a device channel."""
    return f"devices/{device_id}/{channel}"
