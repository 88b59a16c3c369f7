"""How a simulated device answers commands (pure: parsing and deciding, no I/O).

A command arrives on ``devices/{id}/commands/{name}`` or ``groups/{group}/commands/{name}``.
Its id is the MQTT 5 correlation data when present, else ``command_id`` in the JSON payload.
The reply goes to the MQTT 5 response topic when present, else to
``devices/{id}/replies/{command_id}``, as ``{"status": "ok"|"error", "result": ...}`` (plus
``command_id``), after a seeded latency; a seeded fraction of devices never answer and a seeded
fraction of replies are failures.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Command:
    """A command as the device understood it."""

    name: str
    command_id: str | None
    args: Any
    group: str | None  # the group for a broadcast, None for a direct command
    response_topic: str | None
    correlation_data: bytes | None


@dataclass(frozen=True, slots=True)
class Reply:
    """What the device publishes in answer, and when."""

    topic: str
    payload: bytes
    delay_s: float
    correlation_data: bytes | None
    ok: bool


def _first(properties: Mapping[str, Any], key: str) -> Any:
    value = properties.get(key)
    if isinstance(value, list | tuple):
        return value[0] if value else None
    return value


def parse_command(
    device_id: str, topic: str, payload: bytes, properties: Mapping[str, Any]
) -> Command | None:
    """The command in an incoming publish, or None when it is not one of this device's commands.

    ``properties`` are gmqtt's: each MQTT 5 property is a list of values.
    """
    parts = topic.split("/")
    if len(parts) != 4 or parts[2] != "commands":
        return None
    if parts[0] == "devices" and parts[1] == device_id:
        group = None
    elif parts[0] == "groups":
        group = parts[1]
    else:
        return None
    name = parts[3]
    try:
        args: Any = orjson.loads(payload) if payload else {}
    except orjson.JSONDecodeError:
        args = None
    correlation = _first(properties, "correlation_data")
    if isinstance(correlation, str):
        correlation = correlation.encode()
    command_id: str | None = None
    if correlation:
        command_id = correlation.decode("utf-8", errors="replace")
    elif isinstance(args, dict) and isinstance(args.get("command_id"), str):
        command_id = args["command_id"]
    response_topic = _first(properties, "response_topic")
    return Command(
        name=name,
        command_id=command_id,
        args=args,
        group=group,
        response_topic=response_topic if isinstance(response_topic, str) else None,
        correlation_data=correlation or None,
    )


class Responder:
    """Decides a device's replies from its seed: latency, failures, silence."""

    def __init__(
        self,
        device_id: str,
        rng: random.Random,
        latency_ms: float,
        fail_rate: float,
        silent: bool,
    ) -> None:
        self.device_id = device_id
        self._rng = rng
        self._latency_ms = latency_ms
        self._fail_rate = fail_rate
        self.silent = silent

    def reply(self, command: Command, state: Mapping[str, float] | None = None) -> Reply | None:
        """The reply to ``command``, or None when the device stays silent or cannot answer."""
        latency_draw, fail_draw = self._rng.random(), self._rng.random()
        if self.silent or command.command_id is None:
            return None
        ok = fail_draw >= self._fail_rate
        delay_s = self._latency_ms * (0.5 + latency_draw) / 1000.0
        doc: dict[str, Any] = {"command_id": command.command_id}
        if ok:
            doc["status"] = "ok"
            doc["result"] = {
                "device_id": self.device_id,
                "command": command.name,
                "group": command.group,
                "state": dict(state or {}),
            }
        else:
            doc["status"] = "error"
            doc["error"] = "simulated failure"
            doc["result"] = {"device_id": self.device_id, "command": command.name}
        topic = command.response_topic or f"devices/{self.device_id}/replies/{command.command_id}"
        return Reply(
            topic=topic,
            payload=orjson.dumps(doc),
            delay_s=delay_s,
            correlation_data=command.correlation_data,
            ok=ok,
        )


def subscriptions(device_id: str, groups: Sequence[str]) -> list[str]:
    """The command topic filters a device subscribes to."""
    return [f"devices/{device_id}/commands/+", *(f"groups/{g}/commands/+" for g in groups)]
