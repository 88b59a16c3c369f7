"""Northbound: Hono's AMQP APIs for applications over our Kafka (pure: no sockets, no clients).

- ``telemetry/{tenant}`` and ``event/{tenant}`` (sources of the application's receiver links):
  the tenant's Kafka topic (``bridge.mapping.tenant_topics``: what the bridge writes and the
  HTTP door's consumers read), in a consumer group per link name
  (:func:`group_id`), so receivers that share a link name share the stream (anycast) and a
  device's records (one partition: keyed by device) stay in order.
- ``command/{tenant}`` (the target of the application's sender link): each message a command,
  ``to`` = ``command/{tenant}/{device}``, ``subject`` = its name (:func:`parse_command`).
- ``command_response/{tenant}/{reply_id}`` (a receiver link's source): the replies of the
  commands whose ``reply-to`` named it.
- Who: a service account with the pub/sub API's rights, decided by iot-api's own rule
  (``api.plumbing.access.may_access`` on the tenant's topic): an account bound to a tenant
  reaches only that tenant's addresses; a device never reaches any (:func:`north_refusal`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from amqp.command_model import RESPONSE_PREFIX
from amqp.model import Account, Cond, Refusal
from api.http_devices.model import DeviceRef, command_id_ok, path_device
from api.plumbing.access import Access, Principal, may_access
from bridge.topics import DEFAULT_TENANT, Channel
from registry.model import TopicAcl

COMMAND_TARGET: Final = "command"
_STREAMS: Final = {"telemetry": Channel.TELEMETRY, "event": Channel.EVENTS}
_MAX_REPLY_ID: Final = 128
JSON: Final = "application/json"


@dataclass(frozen=True, slots=True)
class StreamSource:
    """``telemetry/{tenant}`` or ``event/{tenant}``."""

    channel: Channel
    tenant: str


@dataclass(frozen=True, slots=True)
class ReplySource:
    """``command_response/{tenant}/{reply_id}``."""

    tenant: str
    reply_id: str

    @property
    def address(self) -> str:
        return f"{RESPONSE_PREFIX}{self.tenant}/{self.reply_id}"


@dataclass(frozen=True, slots=True)
class CommandTarget:
    """``command/{tenant}``."""

    tenant: str


def _tenant_ok(tenant: str) -> bool:
    return path_device(tenant, "x") is not None


def parse_source(address: str | None) -> StreamSource | ReplySource | Refusal | None:
    """A northbound source, a refusal for a malformed one, None if it is no northbound source
    (a device's ``command`` source, ...)."""
    if not address:
        return None
    head, slash, rest = address.partition("/")
    if head in _STREAMS and slash:
        if "/" in rest or not _tenant_ok(rest):
            return Refusal(Cond.NOT_FOUND, f"unknown source {address[:100]!r}")
        return StreamSource(_STREAMS[head], rest)
    if address.startswith(RESPONSE_PREFIX):
        tenant, slash, reply_id = address[len(RESPONSE_PREFIX) :].partition("/")
        if not slash or not _tenant_ok(tenant) or not reply_id or len(reply_id) > _MAX_REPLY_ID:
            return Refusal(Cond.NOT_FOUND, f"unknown source {address[:100]!r}")
        return ReplySource(tenant, reply_id)
    return None


def parse_target(address: str | None) -> CommandTarget | Refusal | None:
    """``command/{tenant}``; None for any other target (a device's upload link)."""
    if not address:
        return None
    head, slash, tenant = address.partition("/")
    if head != COMMAND_TARGET or not slash:
        return None
    if "/" in tenant or not _tenant_ok(tenant):
        return Refusal(Cond.NOT_FOUND, f"unknown target {address[:100]!r}")
    return CommandTarget(tenant)


def north_refusal(
    principal: DeviceRef | Account | None,
    caller: Principal | None,
    *,
    tenant: str,
    topic: str,
    access: Access,
    acl: TopicAcl | None,
    tenants: Collection[str] | None,
) -> Refusal | None:
    """May the logged-in ``principal`` (its pub/sub rights: ``caller``) use ``tenant``'s
    northbound address, whose Kafka topic is ``topic``? iot-api's rule decides
    (``may_access``); ``tenants`` None: no authentication (the insecure mode), anyone may."""
    if tenants is None:
        return None
    if isinstance(principal, DeviceRef):
        return Refusal(
            Cond.UNAUTHORIZED, f"{principal.username} is a device: applications log in as svc/"
        )
    if caller is None:
        return Refusal(Cond.UNAUTHORIZED, "this account's roles may not use the pub/sub API")
    if caller.tenant is not None and caller.tenant != tenant:
        return Refusal(Cond.UNAUTHORIZED, f"tenant {tenant} is not {caller.name}'s")
    if tenant != DEFAULT_TENANT and tenant not in tenants:
        return Refusal(Cond.NOT_FOUND, f"no tenant {tenant}")
    if not may_access(caller, topic, access, acl, tenants):
        return Refusal(Cond.UNAUTHORIZED, f"{caller.name} may not {access} {topic}")
    return None


def group_id(source: StreamSource, link_name: str) -> str:
    """The Kafka consumer group of a receiver link: one per tenant, channel and link name."""
    return f"iot-amqp.{source.tenant}.{source.channel.value}.{link_name}"


# --- records to applications ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record handed to a northbound link (from amqp.north_kafka)."""

    partition: int
    offset: int
    epoch: int  # of the partition's assignment it was read in
    key: bytes | None
    value: bytes
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


def stream_properties(rec: Record, tenant: str) -> dict[str, Any]:
    """The application properties of a record sent to an application (Hono's ``device_id``,
    ``tenant_id``; and the bridge's ``orig_adapter``, ``received_at`` when present)."""
    props: dict[str, Any] = {
        "device_id": (rec.key or b"").decode("utf-8", "replace"),
        "tenant_id": tenant,
    }
    for name, value in rec.headers:
        if name in ("orig_adapter", "received_at") and value is not None:
            props[name] = value.decode("utf-8", "replace")
    return props


class PartitionOffsets:
    """The records of one partition sent and not yet settled: the offset to commit is the
    first one still unsettled (everything before it is settled: at least once)."""

    def __init__(self, start: int) -> None:
        self.committable = start
        self._pending: dict[int, bool] = {}  # offset -> settled; offsets come in order

    def sent(self, offset: int) -> None:
        self._pending.setdefault(offset, False)

    def done(self, offset: int) -> bool:
        """``offset`` settled; True when the committable offset moved."""
        if offset not in self._pending:
            return False
        self._pending[offset] = True
        moved = False
        while self._pending:
            first = next(iter(self._pending))
            if not self._pending[first]:
                break
            del self._pending[first]
            self.committable = first + 1
            moved = True
        return moved


# --- commands from applications ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppCommand:
    """A command an application sent on ``command/{tenant}``."""

    tenant: str
    device: str
    name: str
    command_id: str
    args: dict[str, Any] = field(default_factory=dict)
    reply: ReplySource | None = None
    ttl_ms: int | None = None


def _bad(code: str, detail: str) -> Refusal:
    return Refusal(Cond.BAD_REQUEST, f"{code}: {detail}", {"code": code})


def parse_command(
    target: CommandTarget,
    *,
    to: str | None,
    subject: str | None,
    correlation_id: Any,
    message_id: Any,
    reply_to: str | None,
    body: Any,
    ttl_s: float | None,
) -> AppCommand | Refusal:
    """Hono's command message -> the command path's fields (docs/amqp.md, "Northbound")."""
    prefix = f"{COMMAND_TARGET}/{target.tenant}/"
    if not to or not to.startswith(COMMAND_TARGET + "/"):
        return Refusal(Cond.NOT_FOUND, f"`to` must be {prefix}{{device}}")
    if not to.startswith(prefix):
        return Refusal(Cond.UNAUTHORIZED, f"this link sends to tenant {target.tenant} only")
    device = to[len(prefix) :]
    if path_device(target.tenant, device) is None:
        return Refusal(Cond.NOT_FOUND, f"invalid device id in {to[:100]!r}")
    if not subject or "/" in subject or "+" in subject or "#" in subject:
        return _bad("bad_name", "subject (the command name) must be one MQTT level")
    raw_id = correlation_id if correlation_id is not None else message_id
    command_id = None if raw_id is None else str(raw_id)
    if command_id is None or not command_id_ok(command_id):
        return _bad("bad_id", "correlation-id or message-id must be a command id (one MQTT level)")
    args: Any = {}
    if isinstance(body, bytes | bytearray | memoryview | str) and len(body):
        try:
            args = orjson.loads(bytes(body) if not isinstance(body, str) else body)
        except orjson.JSONDecodeError as exc:
            return _bad("not_json", str(exc))
    elif body is not None and not isinstance(body, bytes | bytearray | memoryview | str):
        args = body
    if not isinstance(args, dict):
        return _bad("not_object", "the body must be a JSON object (the command's args)")
    reply: ReplySource | None = None
    if reply_to:
        found = parse_source(reply_to)
        if not isinstance(found, ReplySource) or found.tenant != target.tenant:
            return _bad("bad_reply_to", f"reply-to must be {RESPONSE_PREFIX}{target.tenant}/{{id}}")
        reply = found
    ttl_ms = int(ttl_s * 1000) if ttl_s else None
    return AppCommand(target.tenant, device, subject, command_id, args, reply, ttl_ms)


def reply_message(doc: Mapping[str, Any]) -> tuple[int, bytes, str]:
    """An ``iot.command-replies`` record -> (Hono's ``status``, body, content type)."""
    status = doc.get("status")
    if status == "ok":
        return 200, orjson.dumps(doc.get("result")), JSON
    if status == "error":
        return 500, str(doc.get("error") or "error").encode(), "text/plain"
    return 400, str(doc.get("raw") or doc.get("error") or "").encode(), "text/plain"
