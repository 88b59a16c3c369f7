"""Commands to AMQP devices and their replies, as Hono's AMQP adapter (pure: no sockets).

- A device receives its commands on a receiver link with source ``command`` (Hono's gateways
  name the device: ``command/{tenant}/{id}`` or ``command//{id}``; here only the logged-in
  device itself may be named). Commands go unsettled and the device settles them (receiver
  settle mode ``first``); anything else is refused at attach with ``amqp:precondition-failed``.
- Each command is the MQTT command the command path published to the device's topic
  (api.http_devices.model.command_of): ``subject`` = its name, ``correlation-id`` = its id,
  ``reply-to`` = ``command_response/{tenant}/{id}/{command_id}``, application properties
  ``command_id`` and ``attempt``, content type JSON, the MQTT payload as one Data section.
- A reply is a message to that ``reply-to`` on the device's sender link, with our MQTT reply
  body (``{"status": "ok", ...}``) or Hono's way, any body and the application property
  ``status`` (an HTTP code, api.http_devices.model.reply_payload); it is published as the
  device's MQTT reply ``.../replies/{command_id}``, so the command path records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from amqp.model import RCV_SETTLE_FIRST, Account, Cond, Refusal
from api.http_devices.model import (
    DeviceRef,
    HttpCommand,
    ReplyError,
    command_id_ok,
    path_device,
    reply_payload,
)
from bridge.topics import DEFAULT_TENANT

COMMAND_SOURCE: Final = "command"
RESPONSE_PREFIX: Final = "command_response/"
SND_SETTLED: Final = 1  # AMQP sender-settle-mode settled (pre-settled only)
CONTENT_TYPE: Final = "application/json"


def command_device(
    principal: DeviceRef | Account | None, source: str | None
) -> DeviceRef | Refusal | None:
    """The device whose commands a receiver link with this source asks for; None if the
    source is no command source (another kind of link). Only the logged-in device itself
    (without authentication, the device the source names)."""
    if source is None:
        return None
    head, slash, rest = source.partition("/")
    if head != COMMAND_SOURCE:
        return None
    if isinstance(principal, Account):
        return Refusal(Cond.UNAUTHORIZED, f"svc/{principal.name} is no device: log in as one")
    if not slash:
        if principal is None:
            return Refusal(Cond.NOT_FOUND, "anonymous: name the device (command/{tenant}/{id})")
        return principal
    tenant, slash, device = rest.partition("/")
    if not slash or not device or "/" in device:
        return Refusal(Cond.NOT_FOUND, f"unknown source {source[:100]!r}")
    named = path_device(tenant or (principal.tenant if principal else DEFAULT_TENANT), device)
    if named is None:
        return Refusal(Cond.NOT_FOUND, "invalid tenant or device id in the source")
    if principal is not None and named != principal:
        return Refusal(
            Cond.UNAUTHORIZED,
            f"{principal.username} may receive only its own commands, not {named.username}'s",
        )
    return named


def check_command_settle_modes(snd_settle_mode: int, rcv_settle_mode: int) -> Refusal | None:
    """Commands go unsettled and the device settles first (Hono); else refused."""
    if snd_settle_mode == SND_SETTLED or rcv_settle_mode != RCV_SETTLE_FIRST:
        return Refusal(
            Cond.PRECONDITION,
            "commands are sent unsettled and settled by the device: attach with "
            "snd-settle-mode unsettled or mixed, rcv-settle-mode first",
        )
    return None


def reply_to(ref: DeviceRef, command_id: str) -> str:
    """The ``reply-to`` a command carries (what the device's reply is sent to)."""
    return f"{RESPONSE_PREFIX}{ref.tenant}/{ref.device}/{command_id}"


@dataclass(frozen=True, slots=True)
class CommandMessage:
    """The AMQP message of a command (built into a proton ``Message`` by amqp.commands)."""

    subject: str
    correlation_id: str
    reply_to: str
    properties: dict[str, Any]
    body: bytes
    content_type: str = CONTENT_TYPE


def command_message(ref: DeviceRef, command: HttpCommand) -> CommandMessage:
    attempt: Any = int(command.attempt) if command.attempt.isdigit() else command.attempt
    return CommandMessage(
        subject=command.name,
        correlation_id=command.command_id,
        reply_to=reply_to(ref, command.command_id),
        properties={"command_id": command.command_id, "attempt": attempt},
        body=command.payload,
    )


def is_reply_address(address: str | None) -> bool:
    return bool(address) and str(address).startswith(RESPONSE_PREFIX)


@dataclass(frozen=True, slots=True)
class Reply:
    """A device's reply to publish: as which device, to which command, the MQTT payload."""

    device: DeviceRef
    command_id: str
    payload: bytes


def parse_reply(
    principal: DeviceRef | Account | None,
    address: str,
    body: bytes,
    status: Any,
    max_payload_bytes: int,
) -> Reply | Refusal:
    """A reply sent to ``command_response/{tenant}/{id}/{command_id}``: only for the
    logged-in device itself (another device's or tenant's: ``amqp:unauthorized-access``)."""
    parts = address[len(RESPONSE_PREFIX) :].split("/")
    if len(parts) != 3 or not command_id_ok(parts[2]):
        return Refusal(Cond.NOT_FOUND, f"unknown reply address {address[:100]!r}")
    if isinstance(principal, Account):
        return Refusal(Cond.UNAUTHORIZED, f"svc/{principal.name} is no device: log in as one")
    named = path_device(parts[0] or DEFAULT_TENANT, parts[1])
    if named is None:
        return Refusal(Cond.NOT_FOUND, "invalid tenant or device id in the reply address")
    if principal is not None and named != principal:
        return Refusal(
            Cond.UNAUTHORIZED,
            f"{principal.username} may reply only as itself, not as {named.username}",
        )
    if len(body) > max_payload_bytes:
        return Refusal(Cond.BAD_REQUEST, f"oversized: reply over {max_payload_bytes} bytes",
                       {"code": "oversized"})  # fmt: skip
    try:
        payload = reply_payload(body, None if status is None else str(status))
    except ReplyError as exc:
        return Refusal(Cond.BAD_REQUEST, f"bad_status: {exc}", {"code": "bad_status"})
    return Reply(named, parts[2], payload)
