"""Commands and devices over HTTP for operators and services (pure): who may do what, request
bodies and queries, and the views answered (issue 14 item 6).

Who may do what: an api key or registry account holds one or more roles; each role grants the
operations of :data:`ROLE_OPERATIONS` (docs/api.md has the table). Scope comes on top: a
caller bound to a tenant (every api key, a tenant's account) reaches only that tenant's devices,
commands and tenant entry; a system-wide account (no tenant) reaches every tenant's. The
registry checks its own rights again on every registry read and change (and audits them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from api.console.fleet import device_json
from api.errors import ACCESS_NOT_PERMITTED, INCORRECT_JSON, RESOURCE_NOT_FOUND, ApiError
from commands.model import parse_target
from registry.ids import DEFAULT_TENANT
from registry.model import Role

OPERATOR_TAGS: Final = frozenset({"commands", "devices", "registry"})  # the route table's tags
FINAL_STATES: Final = frozenset({"succeeded", "failed", "expired", "rejected"})
STATES: Final = frozenset({"accepted", "sent", "delivered"}) | FINAL_STATES


class Operation(StrEnum):
    READ = "read"  # list devices with presence, a device, its telemetry stream, commands
    SEND = "send"  # send commands to devices and groups
    DEVICES = "devices"  # registry: add, disable/enable, rotate, certificate, groups, delete
    TENANTS = "tenants"  # registry: create, disable/enable, delete tenants (system-wide only)


ROLE_OPERATIONS: Final[Mapping[Role, frozenset[Operation]]] = {
    Role.VIEWER: frozenset({Operation.READ}),
    Role.API: frozenset({Operation.READ, Operation.SEND}),
    Role.OPERATOR: frozenset({Operation.READ, Operation.SEND, Operation.DEVICES}),
    Role.TENANT_ADMIN: frozenset({Operation.READ, Operation.SEND, Operation.DEVICES}),
    Role.ADMIN: frozenset(Operation),
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: a name for the audit trail, roles, tenant (None: system-wide)."""

    name: str
    roles: tuple[Role, ...]
    tenant: str | None


def operations(caller: Caller) -> frozenset[Operation]:
    found: set[Operation] = set()
    for role in caller.roles:
        found |= ROLE_OPERATIONS.get(role, frozenset())
    if caller.tenant is not None:
        found.discard(Operation.TENANTS)  # tenants are created and removed system-wide
    return frozenset(found)


def require(caller: Caller, operation: Operation) -> None:
    """403 (MR's body) unless one of the caller's roles grants ``operation``."""
    if operation not in operations(caller):
        roles = ", ".join(str(r) for r in caller.roles) or "none"
        raise ApiError(
            403, ACCESS_NOT_PERMITTED, f"Role(s) {roles} may not {operation} (docs/api.md)."
        )


def reaches(caller: Caller, tenant: str | None) -> bool:
    """May the caller see anything of ``tenant`` (None: an unknown tenant, system-wide only)?"""
    return caller.tenant is None or caller.tenant == tenant


def scoped_tenant(caller: Caller, asked: str | None) -> str:
    """The tenant a request acts in: the one asked, else the caller's, else the default; 404
    for another tenant's (its existence is not told to the caller)."""
    tenant = asked or caller.tenant or DEFAULT_TENANT
    if not reaches(caller, tenant):
        raise not_found(f"No tenant [{tenant}].")
    return tenant


def not_found(message: str) -> ApiError:
    return ApiError(404, RESOURCE_NOT_FOUND, message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, INCORRECT_JSON, message)


# --- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendRequest:
    """A command to send: ``key`` is the ``iot.commands`` key (a device id or ``group:<g>``)."""

    tenant: str
    key: str
    name: str
    args: dict[str, Any]
    timeout_ms: int | None
    max_attempts: int | None
    ttl_ms: int | None
    reply_expected: bool
    command_id: str | None

    @property
    def group(self) -> str | None:
        return self.key[len("group:") :] if self.key.startswith("group:") else None


def _opt_int(body: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{name} must be an integer {low}-{high}.")
    return value


def parse_send(body: Any, caller: Caller) -> SendRequest:
    """``{"device": id | "group": name, "name", "args", "tenant", "timeout_ms",
    "max_attempts", "ttl_ms", "reply_expected", "command_id"}``."""
    if not isinstance(body, dict):
        raise bad_request("The body must be a JSON object.")
    device, group = body.get("device"), body.get("group")
    if (device is None) == (group is None):
        raise bad_request("Give exactly one of device and group.")
    target = str(device) if device is not None else f"group:{group}"
    if not isinstance(device or group, str) or parse_target(target) is None:
        raise bad_request(f"Not a device id or group name: {target!r}.")
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("name (the command) must be a non-empty string.")
    args = body.get("args", {})
    if not isinstance(args, dict):
        raise bad_request("args must be a JSON object.")
    reply_expected = body.get("reply_expected", True)
    if not isinstance(reply_expected, bool):
        raise bad_request("reply_expected must be true or false.")
    cid = body.get("command_id")
    if cid is not None and (not isinstance(cid, str) or not 1 <= len(cid) <= 128):
        raise bad_request("command_id must be a string of 1-128 characters.")
    asked = body.get("tenant")
    if asked is not None and not isinstance(asked, str):
        raise bad_request("tenant must be a string.")
    return SendRequest(
        tenant=scoped_tenant(caller, asked),
        key=target,
        name=name,
        args=args,
        timeout_ms=_opt_int(body, "timeout_ms", 1, 24 * 3600 * 1000),
        max_attempts=_opt_int(body, "max_attempts", 1, 100),
        ttl_ms=_opt_int(body, "ttl_ms", 1, 30 * 24 * 3600 * 1000),
        reply_expected=reply_expected,
        command_id=cid,
    )


def parse_seconds(text: str | None, name: str, maximum: float) -> float:
    """A query's seconds (absent: 0), at most ``maximum``; 400 when not a number >= 0."""
    if text is None or text == "":
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise bad_request(f"{name} must be a number of seconds.") from None
    if not value >= 0:
        raise bad_request(f"{name} must be >= 0.")
    return min(value, maximum)


def parse_ms(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise bad_request(f"{name} must be epoch milliseconds.")
    return int(text)


def parse_limit(text: str | None, default: int, maximum: int) -> int:
    if text is None or text == "":
        return default
    if not text.isdigit() or int(text) < 1:
        raise bad_request("limit must be a positive integer.")
    return min(int(text), maximum)


@dataclass(frozen=True, slots=True)
class CommandFilter:
    """History filters: device id (or ``group:<g>``), state, status time window (epoch ms)."""

    device: str | None = None
    state: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in STATES:
            raise bad_request(f"status must be one of {', '.join(sorted(STATES))}.")

    def matches(self, entry: Mapping[str, Any]) -> bool:
        at = entry.get("at")
        return (
            (self.device is None or entry.get("device_id") == self.device)
            and (self.state is None or entry.get("state") == self.state)
            and (self.since_ms is None or (isinstance(at, int) and at >= self.since_ms))
            and (self.until_ms is None or (isinstance(at, int) and at <= self.until_ms))
        )


def command_tenant(entry: Mapping[str, Any]) -> str | None:
    """The tenant of a command as its status records tell it (None: not known yet)."""
    found = entry.get("tenant")
    return found if isinstance(found, str) else None


def status_tenant(doc: Mapping[str, Any]) -> str | None:
    """The tenant of one ``iot.command-status`` value: its command's ``tenant`` (none: the
    default tenant); None when the record carries no command (a rejected record)."""
    command = doc.get("command")
    if not isinstance(command, dict):
        return None
    tenant = command.get("tenant", DEFAULT_TENANT)
    return tenant if isinstance(tenant, str) else None


def command_view(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A command as answered: id, tenant, target, name, args, state, states, replies."""
    state = entry.get("state")
    return {
        "command_id": entry.get("command_id"),
        "tenant": entry.get("tenant"),
        "target": entry.get("device_id"),
        "name": entry.get("name"),
        "args": entry.get("args"),
        "state": state,
        "final": state in FINAL_STATES,
        "at": entry.get("at"),
        "states": list(entry.get("states") or []),
        "replies": list(entry.get("replies") or []),
    }


def visible_commands(
    entries: Iterable[Mapping[str, Any]], caller: Caller, wanted: CommandFilter, limit: int
) -> list[dict[str, Any]]:
    """Newest first: the caller's tenant's commands that match, at most ``limit``."""
    rows = [
        command_view(e)
        for e in entries
        if e.get("states") and reaches(caller, command_tenant(e)) and wanted.matches(e)
    ]
    rows.sort(key=lambda r: r["at"] or 0, reverse=True)
    return rows[:limit]


# --- devices ---------------------------------------------------------------------------------


def groups_of(value: Any, name: str = "groups") -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise bad_request(f"{name} must be a list of group names.")
    return [g.strip() for g in value if g.strip()]


def device_view(device: Any, seen: Mapping[str, Any]) -> dict[str, Any]:
    """A registry device with what the fleet feed knows of it (presence, last seen)."""
    return device_json(device) | {
        "site": device.site,
        "online": seen.get("online"),
        "last_seen": seen.get("last_seen"),
        "presence_at": seen.get("presence_at"),
    }


def presence_matches(row: Mapping[str, Any], state: str | None) -> bool:
    if state is None or state == "":
        return True
    if state not in ("online", "offline"):
        raise bad_request("state must be online or offline.")
    return bool(row.get("online")) == (state == "online")


# --- Server-Sent Events ----------------------------------------------------------------------


def sse_event(event: str, event_id: str, data: bytes) -> bytes:
    """One SSE event; ``data`` is one line of JSON (no newline inside)."""
    return f"event: {event}\nid: {event_id}\n".encode() + b"data: " + data + b"\n\n"
