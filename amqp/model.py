"""What an AMQP device may do and what it gets back (pure: no sockets, no clients).

- Log-in names (SASL PLAIN authcid): a device as ``pump-1`` (tenant ``default``), ``acme/pump-1``
  or Hono's ``pump-1@acme`` (``api.http_devices.model.parse_device_user``, the HTTP door's
  rule), a service account as ``svc/<name>``.
- Upload addresses (the message's ``to`` on an anonymous-terminus link, or the link's target):
  ``telemetry``/``t`` and ``event``/``e`` for the device itself, ``telemetry/{tenant}/{id}`` and
  ``event/{tenant}/{id}`` (``//{id}``: the principal's tenant) only for the device itself.
- Records: exactly the bridge's for the device's own MQTT topic
  (``bridge.mapping.map_message``, as the HTTP door's), plus the header ``orig_adapter: amqp``.
- Outcomes: ``accepted`` once Kafka holds the record, ``rejected`` with the contract's error
  condition for a client error (after its DLQ record is in Kafka), ``released`` when Kafka did
  not answer (the client may resend).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from api.http_devices.model import (
    DeviceRef,
    mqtt_topic,
    over_quota,
    parse_device_user,
    path_device,
)
from bridge.mapping import ErrorCode, KafkaRecord, Topics, map_message
from bridge.topics import DEFAULT_TENANT, Channel
from registry.topics import SERVICE_PREFIX

ADAPTER_HEADER: Final = ("orig_adapter", b"amqp")
# unsettled transfers wait for Kafka (QoS 1); pre-settled ones are at most once (QoS 0)
UNSETTLED_QOS: Final = 1
PRESETTLED_QOS: Final = 0


class Cond(StrEnum):
    """The AMQP error conditions a client sees (docs/amqp.md, "Errors")."""

    BAD_REQUEST = "hono:bad-request"
    UNAUTHORIZED = "amqp:unauthorized-access"
    NOT_FOUND = "amqp:not-found"
    RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
    PRECONDITION = "amqp:precondition-failed"
    MESSAGE_SIZE = "amqp:link:message-size-exceeded"
    LINK_STOLEN = "amqp:link:stolen"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    FORCED = "amqp:connection:forced"
    FRAMING = "amqp:connection:framing-error"
    INTERNAL = "amqp:internal-error"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused transfer (rejected outcome) or attach (link detached): condition + text."""

    condition: Cond
    description: str
    info: dict[str, str] = field(default_factory=dict)


# --- who logged in -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Account:
    """A service account (``svc/<name>``)."""

    name: str


def parse_authcid(authcid: str) -> DeviceRef | Account | None:
    """The SASL PLAIN user name as a device or an account; None if it names neither."""
    head, slash, rest = authcid.partition("/")
    if slash and head == SERVICE_PREFIX:
        return Account(rest) if rest and "/" not in rest else None
    return parse_device_user(authcid)


def parse_plain(response: bytes) -> tuple[str, str, str] | None:
    """SASL PLAIN's ``authzid NUL authcid NUL passwd`` -> (authzid, authcid, passwd)."""
    parts = response.split(b"\0")
    if len(parts) != 3 or not parts[1]:
        return None
    try:
        authzid, authcid, passwd = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    return authzid, authcid, passwd


# --- where an upload goes ------------------------------------------------------------------

_CHANNELS: Final = {
    "telemetry": Channel.TELEMETRY,
    "t": Channel.TELEMETRY,
    "event": Channel.EVENTS,
    "e": Channel.EVENTS,
}


@dataclass(frozen=True, slots=True)
class UploadAddress:
    """A parsed upload address: the channel and, when spelt out, the device it names."""

    channel: Channel
    tenant: str | None = None  # None: the principal's; "" in ``telemetry//id`` also
    device: str | None = None


def parse_upload_address(address: str | None) -> UploadAddress | Refusal:
    """``telemetry``, ``t``, ``event``, ``e``, ``{channel}/{tenant}/{id}``, ``{channel}//{id}``."""
    if not address:
        return Refusal(Cond.NOT_FOUND, "no address: set the message's `to` (telemetry, event)")
    head, slash, rest = address.partition("/")
    channel = _CHANNELS.get(head)
    if channel is None:
        return Refusal(Cond.NOT_FOUND, f"unknown address {address[:100]!r}")
    if not slash:
        return UploadAddress(channel)
    tenant, slash, device = rest.partition("/")
    if not slash or not device or "/" in device:
        return Refusal(Cond.NOT_FOUND, f"unknown address {address[:100]!r}")
    return UploadAddress(channel, tenant or None, device)


def upload_device(
    principal: DeviceRef | Account | None, address: UploadAddress
) -> DeviceRef | Refusal:
    """The device an upload is for: the logged-in device itself (an address naming another
    device or tenant is refused); without authentication (``principal`` None) the address must
    name the device."""
    if isinstance(principal, Account):
        return Refusal(Cond.UNAUTHORIZED, f"svc/{principal.name} is no device: log in as one")
    if address.device is None:
        if principal is None:
            return Refusal(Cond.NOT_FOUND, "anonymous: name the device (telemetry/{tenant}/{id})")
        return principal
    tenant = address.tenant or (principal.tenant if principal else DEFAULT_TENANT)
    named = path_device(tenant, address.device)
    if named is None:
        return Refusal(Cond.NOT_FOUND, "invalid tenant or device id in the address")
    if principal is not None and named != principal:
        return Refusal(
            Cond.UNAUTHORIZED, f"{principal.username} may send only as itself, not {named.username}"
        )
    return named


# --- attach --------------------------------------------------------------------------------

RCV_SETTLE_FIRST: Final = 0  # AMQP receiver-settle-mode first; 1 = second


def check_upload_attach(target: str | None, rcv_settle_mode: int) -> Refusal | None:
    """A device's sender link (our receiver): a null target (anonymous terminus, Hono) or a
    fixed upload address (JMS and simple clients); receiver-settle-mode ``first`` only."""
    if rcv_settle_mode != RCV_SETTLE_FIRST:
        return Refusal(Cond.NOT_IMPLEMENTED, "rcv-settle-mode second is not supported: use first")
    if target is None:
        return None
    found = parse_upload_address(target)
    return found if isinstance(found, Refusal) else None


def check_receiver_attach(source: str | None) -> Refusal:
    """A link on which the client would receive, other than a device's ``command`` link
    (amqp.command_model) and an application's northbound ones (amqp.north_model)."""
    return Refusal(Cond.NOT_FOUND, f"no source {str(source)[:100]!r} to receive from here")


# --- message bodies and records ------------------------------------------------------------


def payload_of(body: Any) -> bytes | Refusal:
    """The payload: one Data section or an AmqpValue string or binary (Hono); else refused."""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    return Refusal(
        Cond.BAD_REQUEST,
        f"bad_body: the body must be one Data section or a string, not {type(body).__name__}",
        {"code": "bad_body"},
    )


def as_amqp(rec: KafkaRecord) -> KafkaRecord:
    """``rec`` with ``orig_adapter: amqp`` (the one header an HTTP record has as ``http``)."""
    headers = [h for h in rec.headers if h[0] != ADAPTER_HEADER[0]]
    return rec._replace(headers=[*headers, ADAPTER_HEADER])


def map_amqp(
    ref: DeviceRef,
    channel: Channel,
    payload: bytes,
    received_at_ms: int,
    *,
    presettled: bool,
    topics: Topics,
    max_payload_bytes: int,
) -> KafkaRecord:
    """The bridge's record of this payload on the device's MQTT topic, marked as AMQP's: QoS 1
    for an unsettled transfer, 0 for a pre-settled one (at most once, as MQTT QoS 0)."""
    rec = map_message(
        mqtt_topic(ref, channel),
        payload,
        PRESETTLED_QOS if presettled else UNSETTLED_QOS,
        received_at_ms,
        topics=topics,
        max_payload_bytes=max_payload_bytes,
    )
    return as_amqp(rec)


def quota_record(
    ref: DeviceRef,
    channel: Channel,
    payload: bytes,
    received_at_ms: int,
    *,
    topics: Topics,
    rate: float,
) -> KafkaRecord:
    """The tenant's DLQ record ``quota_exceeded`` (the bridge's), marked as AMQP's."""
    return as_amqp(over_quota(ref, channel, payload, received_at_ms, topics=topics, rate=rate))


# --- outcomes ------------------------------------------------------------------------------


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"


def rejection_of(rec: KafkaRecord) -> Refusal | None:
    """The refusal a dead-lettered record's sender gets (once its DLQ record is in Kafka)."""
    if rec.error is None:
        return None
    code = rec.error.value
    condition = Cond.RESOURCE_LIMIT if rec.error is ErrorCode.QUOTA_EXCEEDED else Cond.BAD_REQUEST
    return Refusal(condition, f"{code}: {rec.detail}"[:1000], {"code": code})


def settle_outcome(rec: KafkaRecord, kafka_ok: bool) -> tuple[Outcome, Refusal | None]:
    """The disposition of an unsettled upload once Kafka answered for its record: accepted,
    rejected for a dead letter (the client's error), released if Kafka did not take it."""
    if not kafka_ok:
        return Outcome.RELEASED, None
    refusal = rejection_of(rec)
    return (Outcome.ACCEPTED, None) if refusal is None else (Outcome.REJECTED, refusal)
