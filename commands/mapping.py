"""Pure mapping between commands and MQTT: the publish to a device, the reply from it.

Imports no MQTT or Kafka client; the service encodes `CommandPublish` as an MQTT 5 PUBLISH
with properties (`mqtt_codec.publish_properties`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from bridge.topics import DEFAULT_TENANT, TENANT_RE, tenant_mqtt_root
from commands.model import DEVICE_ID_RE, Command

__all__ = [
    "REPLY_SUBSCRIPTION",
    "REPLY_SUBSCRIPTIONS",
    "CommandPublish",
    "Reply",
    "build_publish",
    "command_topic",
    "parse_reply",
    "parse_reply_topic",
    "parse_tenant_reply_topic",
    "reply_topic",
]

#: What the bridge subscribes to for replies.
REPLY_SUBSCRIPTION = "devices/+/replies/+"
#: ... and every other tenant's devices' replies (tenant roots, docs/security.md)
REPLY_SUBSCRIPTIONS = (REPLY_SUBSCRIPTION, "tenants/+/devices/+/replies/+")


def command_topic(command: Command) -> str:
    """Under the command's tenant's root only: a command never reaches another tenant."""
    root = tenant_mqtt_root(command.tenant)
    if command.target.group is not None:
        return f"{root}groups/{command.target.group}/commands/{command.name}"
    return f"{root}devices/{command.target.device_id}/commands/{command.name}"


def reply_topic(device_id: str, command_id: str, tenant: str = DEFAULT_TENANT) -> str:
    return f"{tenant_mqtt_root(tenant)}devices/{device_id}/replies/{command_id}"


@dataclass(frozen=True, slots=True)
class CommandPublish:
    """Everything one MQTT publish of a command needs."""

    topic: str
    payload: bytes
    qos: int
    correlation_data: bytes
    response_topic: str | None
    message_expiry_s: int
    user_properties: tuple[tuple[str, str], ...]


def build_publish(command: Command, attempt: int, now_ms: int) -> CommandPublish | None:
    """The publish for ``attempt`` of ``command`` at ``now_ms``; ``None`` if its TTL ran out.

    The payload is the args object with ``command_id`` added (for MQTT 3.1.1 devices, which
    see no properties). Message expiry is the remaining TTL rounded up to whole seconds, so
    the broker never drops a message the bridge still considers live.
    """
    remaining_ms = command.deadline - now_ms
    if remaining_ms <= 0:
        return None
    payload = orjson.dumps({**command.args, "command_id": command.command_id})
    response = (
        None
        if command.target.device_id is None
        else reply_topic(command.target.device_id, command.command_id, command.tenant)
    )
    return CommandPublish(
        topic=command_topic(command),
        payload=payload,
        qos=1,
        correlation_data=command.command_id.encode(),
        response_topic=response,
        message_expiry_s=max(1, math.ceil(remaining_ms / 1000)),
        user_properties=(("command_id", command.command_id), ("attempt", str(attempt))),
    )


def parse_reply_topic(topic: str) -> tuple[str, str] | None:
    """``devices/{id}/replies/{command_id}`` -> ``(id, command_id)``, else ``None``."""
    parts = topic.split("/")
    if len(parts) != 4 or parts[0] != "devices" or parts[2] != "replies":
        return None
    device_id, command_id = parts[1], parts[3]
    if not DEVICE_ID_RE.fullmatch(device_id) or not DEVICE_ID_RE.fullmatch(command_id):
        return None
    return device_id, command_id


def parse_tenant_reply_topic(topic: str) -> tuple[str, str, str] | None:
    """``[tenants/{t}/]devices/{id}/replies/{command_id}`` -> ``(tenant, id, command_id)``."""
    if not topic.startswith("tenants/"):
        ids = parse_reply_topic(topic)
        return None if ids is None else (DEFAULT_TENANT, *ids)
    _, tenant, rest = topic.split("/", 2)
    ids = parse_reply_topic(rest)
    if ids is None or tenant == DEFAULT_TENANT or TENANT_RE.fullmatch(tenant) is None:
        return None
    return (tenant, *ids)


@dataclass(frozen=True, slots=True)
class Reply:
    """A device's reply. ``ok`` is ``None`` when the payload could not be read."""

    device_id: str
    command_id: str
    ok: bool | None
    result: Any
    error: str | None
    raw: bytes
    tenant: str = DEFAULT_TENANT


def parse_reply(
    device_id: str, command_id: str, payload: bytes, tenant: str = DEFAULT_TENANT
) -> Reply:
    """Read a reply payload: ``{"status": "ok"|"error", "result": ...}``. Never raises."""
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        return Reply(device_id, command_id, None, None, f"bad_json: {exc}", payload, tenant)
    if not isinstance(doc, dict) or doc.get("status") not in ("ok", "error"):
        return Reply(
            device_id,
            command_id,
            None,
            None,
            "bad_reply: status must be ok or error",
            payload,
            tenant,
        )
    claimed = doc.get("command_id")
    if claimed is not None and claimed != command_id:
        return Reply(
            device_id,
            command_id,
            None,
            None,
            f"bad_reply: payload command_id {claimed!r} differs from the topic",
            payload,
            tenant,
        )
    ok = doc["status"] == "ok"
    error = doc.get("error")
    return Reply(
        device_id,
        command_id,
        ok,
        doc.get("result"),
        None if ok else (str(error) if error is not None else "error"),
        payload,
        tenant,
    )
