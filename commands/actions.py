"""What the tracker asks the command service to do, and the records those writes carry.

Pure: data classes and record builders, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.topics import DEFAULT_TENANT
from commands.mapping import Reply
from commands.model import Command, Source
from commands.status import StatusRecord

__all__ = [
    "DUPLICATE",
    "INVALID",
    "LATE",
    "MATCHED",
    "MISMATCH",
    "UNKNOWN",
    "Action",
    "DeadLetterAction",
    "PublishAction",
    "ReleaseAction",
    "ReplyAction",
    "StatusAction",
    "dead_letter",
    "reply_record",
]


@dataclass(frozen=True, slots=True)
class StatusAction:
    """Write ``status`` to ``iot.command-status``; once written, release ``release``."""

    status: StatusRecord
    release: Source | None = None


@dataclass(frozen=True, slots=True)
class PublishAction:
    command: Command
    attempt: int


@dataclass(frozen=True, slots=True)
class ReplyAction:
    """Write a reply record to ``iot.command-replies`` (key: the device id)."""

    key: str
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class DeadLetterAction:
    """Write a record to ``iot.commands.dlq`` (key: the command's key)."""

    key: str
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReleaseAction:
    """Nothing to write: the consumer offset of ``source`` can be committed."""

    source: Source


Action = StatusAction | PublishAction | ReplyAction | DeadLetterAction | ReleaseAction

# Reply match outcomes, written into the reply record's "match" field.
MATCHED = "matched"
LATE = "late"
DUPLICATE = "duplicate"
UNKNOWN = "unknown"
MISMATCH = "device_mismatch"
INVALID = "invalid"


def dead_letter(
    command: Command, attempts: int, now: int, reason: str, detail: str
) -> DeadLetterAction:
    """The ``iot.commands.dlq`` record of a command that expired or ran out of attempts."""
    return DeadLetterAction(
        command.target.key,
        {
            "command_id": command.command_id,
            "device_id": command.target.key,
            "command": command.to_record(),
            "reason": reason,
            "detail": detail,
            "attempts": attempts,
            "at": now,
        },
    )


def reply_record(reply: Reply, now: int, match: str, attempt: int | None) -> ReplyAction:
    """The ``iot.command-replies`` record of a reply; ``match`` says what it answered."""
    record: dict[str, Any] = {
        "command_id": reply.command_id,
        "device_id": reply.device_id,
        "status": None if reply.ok is None else ("ok" if reply.ok else "error"),
        "result": reply.result,
        "error": reply.error,
        "match": match,
        "attempt": attempt,
        "received_at": now,
    }
    if reply.ok is None:
        record["raw"] = reply.raw.decode("utf-8", errors="replace")
    if reply.tenant != DEFAULT_TENANT:
        record["tenant"] = reply.tenant
    return ReplyAction(reply.device_id, record)
