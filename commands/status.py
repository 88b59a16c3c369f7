"""Command status records: the ``iot.command-status`` value, its encoding, and the command
it carries (what the tracker resumes from after a restart).

Pure: no Kafka, no sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from bridge.topics import DEFAULT_TENANT
from commands.model import FINAL_STATES, Command, Source, State, parse_target

__all__ = [
    "StatusRecord",
    "command_from_status",
    "decode_status",
    "encode_status",
    "status_fields",
]


@dataclass(frozen=True, slots=True)
class StatusRecord:
    """One ``iot.command-status`` value (key: the command id).

    The design's fields are ``state, attempt, device_id, at, detail``; the tracker adds what it
    needs to resume after a restart: the command itself, ``sent_at`` (when the current attempt
    went out), the source partition/offset, and, for group commands, the reply counts.
    """

    command_id: str
    state: State
    attempt: int
    device_id: str | None
    at: int
    detail: str | None = None
    command: Mapping[str, Any] | None = None
    sent_at: int | None = None
    source: Source | None = None
    replies: Mapping[str, int] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def status_fields(status: StatusRecord) -> dict[str, Any]:
    """The design's fields of a status record (what ``iot-cmd --json`` prints)."""
    return {
        "command_id": status.command_id,
        "state": status.state.value,
        "attempt": status.attempt,
        "device_id": status.device_id,
        "at": status.at,
        "detail": status.detail,
    }


def encode_status(status: StatusRecord) -> bytes:
    doc = status_fields(status)
    if status.command is not None:
        doc["command"] = status.command
    if status.sent_at is not None:
        doc["sent_at"] = status.sent_at
    if status.source is not None:
        doc["source"] = {"partition": status.source.partition, "offset": status.source.offset}
    if status.replies:
        doc["replies"] = dict(status.replies)
    return orjson.dumps(doc)


def decode_status(key: bytes | None, value: bytes | None) -> StatusRecord | None:
    """Read a status record; ``None`` for a tombstone or anything unreadable."""
    if value is None:
        return None
    try:
        doc = orjson.loads(value)
        state = State(doc["state"])
        command_id = doc.get("command_id") or (key.decode() if key is not None else None)
        if not isinstance(command_id, str):
            return None
        src = doc.get("source")
        source = Source(int(src["partition"]), int(src["offset"])) if src else None
        command = doc.get("command")
        return StatusRecord(
            command_id=command_id,
            state=state,
            attempt=int(doc.get("attempt", 0)),
            device_id=doc.get("device_id"),
            at=int(doc.get("at", 0)),
            detail=doc.get("detail"),
            command=command if isinstance(command, dict) else None,
            sent_at=int(doc["sent_at"]) if doc.get("sent_at") is not None else None,
            source=source,
            replies={str(k): int(v) for k, v in (doc.get("replies") or {}).items()},
        )
    except (orjson.JSONDecodeError, KeyError, ValueError, TypeError, AttributeError):
        return None


def command_from_status(status: StatusRecord) -> Command | None:
    """Rebuild the `Command` a status record carries (``None`` if it carries none)."""
    doc = status.command
    if doc is None or status.device_id is None:
        return None
    target = parse_target(status.device_id)
    if target is None:
        return None
    try:
        return Command(
            command_id=status.command_id,
            target=target,
            name=str(doc["name"]),
            args=dict(doc.get("args") or {}),
            timeout_ms=int(doc["timeout_ms"]),
            max_attempts=int(doc["max_attempts"]),
            reply_expected=bool(doc.get("reply_expected", True)),
            created_at=int(doc["created_at"]),
            ttl_ms=int(doc["ttl_ms"]),
            tenant=str(doc.get("tenant", DEFAULT_TENANT)),
        )
    except (KeyError, ValueError, TypeError):
        return None
