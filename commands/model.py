"""Command path data model: command records, their states and the state machine.

Pure: imports neither paho nor confluent_kafka. Parsing returns errors as data
(`Rejection`) so that bad input never raises on the hot path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from bridge.errors import BridgeError
from bridge.topics import DEFAULT_TENANT, TENANT_RE

__all__ = [
    "DEVICE_ID_RE",
    "FINAL_STATES",
    "GROUP_PREFIX",
    "NAME_RE",
    "Command",
    "CommandDefaults",
    "CommandPathError",
    "InvalidTransitionError",
    "Rejection",
    "Source",
    "State",
    "Target",
    "check_transition",
    "parse_command",
    "parse_target",
]

#: The design's device id format; group names and command names follow the same rule
#: because both become one MQTT topic level.
DEVICE_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
NAME_RE = DEVICE_ID_RE
GROUP_PREFIX = "group:"


class CommandPathError(BridgeError):
    """Root of the command path's errors."""


class InvalidTransitionError(CommandPathError):
    """A status change that the state machine does not allow."""


class State(StrEnum):
    ACCEPTED = "accepted"
    SENT = "sent"
    DELIVERED = "delivered"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    REJECTED = "rejected"


FINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.EXPIRED, State.REJECTED})

# ``None`` is "no status yet".  ``sent -> sent`` and ``delivered -> sent`` are redeliveries
# (the attempt number grows, or a PUBACK reason is recorded); ``-> expired`` straight from
# nothing or ``accepted`` is a command whose TTL ran out before it could be sent.
_ALLOWED: dict[State | None, frozenset[State]] = {
    None: frozenset({State.ACCEPTED, State.REJECTED, State.EXPIRED}),
    State.ACCEPTED: frozenset({State.SENT, State.EXPIRED}),
    State.SENT: frozenset(
        {State.SENT, State.DELIVERED, State.SUCCEEDED, State.FAILED, State.EXPIRED}
    ),
    State.DELIVERED: frozenset({State.SENT, State.SUCCEEDED, State.FAILED, State.EXPIRED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.EXPIRED: frozenset(),
    State.REJECTED: frozenset(),
}


def check_transition(current: State | None, new: State) -> None:
    """Raise `InvalidTransitionError` unless ``current -> new`` is allowed."""
    if new not in _ALLOWED[current]:
        raise InvalidTransitionError(f"{current} -> {new}")


@dataclass(frozen=True, slots=True)
class Target:
    """Who a command goes to: one device, or every device of a group."""

    device_id: str | None = None
    group: str | None = None

    @property
    def key(self) -> str:
        """The Kafka key form: the device id, or ``group:{name}``."""
        if self.group is not None:
            return GROUP_PREFIX + self.group
        assert self.device_id is not None
        return self.device_id

    @property
    def is_group(self) -> bool:
        return self.group is not None


def parse_target(key: str) -> Target | None:
    """Read a command key; ``None`` when it is neither a device id nor ``group:{name}``."""
    if key.startswith(GROUP_PREFIX):
        group = key[len(GROUP_PREFIX) :]
        return Target(group=group) if NAME_RE.fullmatch(group) else None
    return Target(device_id=key) if DEVICE_ID_RE.fullmatch(key) else None


@dataclass(frozen=True, slots=True)
class Source:
    """Where a command record was read: its ``iot.commands`` partition and offset."""

    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class CommandDefaults:
    timeout_ms: int = 10_000
    max_attempts: int = 3
    max_payload_bytes: int = 64 * 1024
    #: Upper bounds that protect the tracker from absurd records.
    max_timeout_ms: int = 24 * 3600 * 1000
    max_attempts_limit: int = 100


@dataclass(frozen=True, slots=True)
class Command:
    """A validated command. ``created_at`` and ``deadline`` are epoch ms (wall clock).

    An explicit ``ttl_ms`` counts from ``created_at`` (the record's timestamp unless the
    record says otherwise). Without one, ``ttl_from_accept`` is set: the TTL is
    ``timeout_ms x max_attempts`` (one window for a group) and counts from the moment the
    bridge accepts the command, so every attempt fits however long it waited in Kafka.
    """

    command_id: str
    target: Target
    name: str
    args: Mapping[str, Any]
    timeout_ms: int
    max_attempts: int
    reply_expected: bool
    created_at: int
    ttl_ms: int
    ttl_from_accept: bool = False
    #: whose device: the command is published only under this tenant's topic root
    tenant: str = DEFAULT_TENANT

    @property
    def deadline(self) -> int:
        return self.created_at + self.ttl_ms

    def to_record(self) -> dict[str, Any]:
        """The ``iot.commands`` value form (plus ``ttl_ms``, ``created_at``, and ``tenant``
        unless it is the default tenant)."""
        record = {
            "command_id": self.command_id,
            "name": self.name,
            "args": dict(self.args),
            "timeout_ms": self.timeout_ms,
            "max_attempts": self.max_attempts,
            "reply_expected": self.reply_expected,
            "ttl_ms": self.ttl_ms,
            "created_at": self.created_at,
        }
        if self.tenant != DEFAULT_TENANT:
            record["tenant"] = self.tenant
        return record


@dataclass(frozen=True, slots=True)
class Rejection:
    """A command record that cannot be executed, and why (a machine code and a detail)."""

    command_id: str
    key: str | None
    code: str
    detail: str
    value: bytes | None = None


def _fallback_id(source: Source | None, topic: str) -> str:
    if source is None:
        return f"{topic}-unknown"
    return f"{topic}-{source.partition}-{source.offset}"


def _positive_int(value: Any, lo: int, hi: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if lo <= value <= hi else None


def _bounded(doc: Mapping[str, Any], name: str, default: int, hi: int) -> tuple[int | None, str]:
    """``doc[name]`` (``default`` when absent or null) if it is in 1..``hi``, else ``None`` and
    why not."""
    value = doc.get(name)
    if value is None:
        value = default
    checked = _positive_int(value, 1, hi)
    return checked, "" if checked is not None else f"{name} {value!r} is not in 1..{hi}"


def parse_command(
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp_ms: int,
    defaults: CommandDefaults,
    source: Source | None = None,
    topic: str = "iot.commands",
    tenant: str | None = None,
) -> Command | Rejection:
    """Validate one ``iot.commands`` record.

    ``timestamp_ms`` is the record's timestamp: the command's TTL runs from there unless the
    value carries its own ``created_at``. ``tenant`` is the sender's tenant (the record's
    ``tenant`` header, stamped by the writer from the sender's credentials; none = the default
    tenant); a ``tenant`` in the value naming another one is refused (``tenant_mismatch``): a
    sender reaches only its own tenant's devices. Never raises on bad input.
    """
    fallback = _fallback_id(source, topic)
    key_text: str | None
    try:
        key_text = key.decode() if key is not None else None
    except UnicodeDecodeError:
        key_text = None
    if value is None:
        return Rejection(fallback, key_text, "empty_value", "the record has no value")
    if len(value) > defaults.max_payload_bytes:
        return Rejection(
            fallback,
            key_text,
            "oversized",
            f"record value is {len(value)} bytes, limit {defaults.max_payload_bytes}",
        )
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return Rejection(fallback, key_text, "bad_json", str(exc), value)
    if not isinstance(doc, dict):
        return Rejection(fallback, key_text, "bad_json", "the value is not a JSON object", value)

    command_id = doc.get("command_id")
    if not isinstance(command_id, str) or not DEVICE_ID_RE.fullmatch(command_id):
        return Rejection(
            fallback, key_text, "bad_command_id", f"command_id {command_id!r} is invalid", value
        )

    def reject(code: str, detail: str) -> Rejection:
        return Rejection(command_id, key_text, code, detail, value)

    sender = DEFAULT_TENANT if tenant is None else tenant
    if TENANT_RE.fullmatch(sender) is None:
        return reject("bad_tenant", f"tenant header {sender[:40]!r} is not a tenant id")
    claimed = doc.get("tenant", sender)
    if claimed != sender:
        return reject(
            "tenant_mismatch",
            f"a command of tenant {sender!r} cannot target tenant {str(claimed)[:40]!r}",
        )
    if key_text is None:
        return reject("bad_key", "the record key (device id or group:{name}) is missing")
    target = parse_target(key_text)
    if target is None:
        return reject("bad_device_id", f"key {key_text!r} is not a device id nor group:{{name}}")
    name = doc.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        return reject("bad_name", f"name {name!r} is invalid")
    args = doc.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return reject("bad_args", "args must be a JSON object")
    if "command_id" in args:
        return reject("bad_args", "args must not contain the reserved key 'command_id'")

    timeout_ms, bad = _bounded(doc, "timeout_ms", defaults.timeout_ms, defaults.max_timeout_ms)
    if timeout_ms is None:
        return reject("bad_timeout", bad)
    max_attempts, bad = _bounded(
        doc, "max_attempts", defaults.max_attempts, defaults.max_attempts_limit
    )
    if max_attempts is None:
        return reject("bad_max_attempts", bad)
    reply_expected = doc.get("reply_expected", True)
    if reply_expected is None:
        reply_expected = True
    if not isinstance(reply_expected, bool):
        return reject("bad_reply_expected", "reply_expected must be a boolean")
    attempts_for_ttl = 1 if target.is_group else max_attempts
    ttl_ms = doc.get("ttl_ms")
    if ttl_ms is None:
        ttl_ms = timeout_ms * attempts_for_ttl
    else:
        checked = _positive_int(ttl_ms, 1, defaults.max_timeout_ms * defaults.max_attempts_limit)
        if checked is None:
            return reject("bad_ttl", f"ttl_ms {ttl_ms!r} is invalid")
        ttl_ms = checked
    created_at = doc.get("created_at", timestamp_ms)
    if created_at is None:
        created_at = timestamp_ms
    if isinstance(created_at, bool) or not isinstance(created_at, int) or created_at < 0:
        return reject("bad_created_at", f"created_at {created_at!r} is not epoch ms")
    return Command(
        command_id=command_id,
        target=target,
        name=name,
        args=args,
        timeout_ms=timeout_ms,
        max_attempts=max_attempts,
        reply_expected=reply_expected,
        created_at=created_at,
        ttl_ms=ttl_ms,
        ttl_from_accept=doc.get("ttl_ms") is None,
        tenant=sender,
    )
