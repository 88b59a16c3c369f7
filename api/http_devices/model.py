"""HTTP devices (Eclipse Hono's HTTP adapter model): who is posting, what goes to Kafka, what
a command looks like in an HTTP answer (pure: no sockets, no clients).

- A device logs in with the registry credentials it uses on MQTT: Basic ``user:secret`` with
  its MQTT user name (``pump-1`` for the default tenant, ``acme/pump-1`` for tenant ``acme``,
  ``registry.topics``); Hono's ``pump-1@acme`` names the same device (``@`` is in no tenant or
  device id, so the two spellings never meet).
- Its telemetry and events become exactly the record the bridge makes of an MQTT message on
  the device's own topic (``bridge.mapping.map_message``: topic, key, value, headers, DLQ
  record), plus one header ``orig_adapter: http`` (Hono's header name) that tells them apart.
- A command the command path published to the device's MQTT topic is answered as Hono does:
  the payload as the body and the headers ``hono-command`` (its name), ``hono-cmd-req-id``
  (the command id, what the reply names) and ours ``iot-cmd-attempt``, ``iot-cmd-topic``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from bridge.mapping import (
    ErrorCode,
    KafkaRecord,
    Rejection,
    Topics,
    dlq_record,
    map_message,
    tenant_topics,
)
from bridge.topics import DEFAULT_TENANT, DEVICE_ID_RE, TENANT_RE, Channel
from registry.topics import SERVICE_PREFIX, device_root, group_root

ADAPTER_HEADER: Final = ("orig_adapter", b"http")
# Hono answers the ``QoS-Level`` header 0 or 1; ours always waits for Kafka, i.e. QoS 1
HTTP_QOS: Final = 1
EMPTY_NOTIFICATION: Final = "application/vnd.eclipse-hono-empty-notification"


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """A registry device: (tenant, id)."""

    tenant: str
    device: str

    @property
    def username(self) -> str:
        """Its MQTT user name (registry.topics.device_username)."""
        return self.device if self.tenant == DEFAULT_TENANT else f"{self.tenant}/{self.device}"


def _valid(tenant: str, device: str) -> DeviceRef | None:
    if TENANT_RE.fullmatch(tenant) is None or DEVICE_ID_RE.fullmatch(device) is None:
        return None
    return DeviceRef(tenant, device)


def parse_device_user(user: str) -> DeviceRef | None:
    """``pump-1`` / ``acme/pump-1`` / ``pump-1@acme`` -> the device; None for anything else
    (a service account ``svc/...`` included: it is no device)."""
    device, at, tenant = user.partition("@")
    if at:
        return None if "/" in device else _valid(tenant, device)
    first, slash, rest = user.partition("/")
    if not slash:
        return _valid(DEFAULT_TENANT, first)
    if first in (SERVICE_PREFIX, DEFAULT_TENANT):  # default's devices have no tenants/ root
        return None
    return _valid(first, rest)


def path_device(tenant: str, device: str) -> DeviceRef | None:
    """The device a Hono-style path ``/telemetry/{tenant}/{device}`` names, if valid."""
    return _valid(tenant, device)


def mqtt_topic(ref: DeviceRef, channel: Channel | str) -> str:
    """The MQTT topic the device would have published on."""
    return f"{device_root(ref.tenant, ref.device)}/{channel}"


def command_filters(ref: DeviceRef, groups: tuple[str, ...]) -> tuple[str, ...]:
    """What an MQTT session acting for the device subscribes to: its commands and its
    groups' broadcasts (as the device itself would)."""
    own = f"{device_root(ref.tenant, ref.device)}/commands/#"
    return (own, *(f"{group_root(ref.tenant, g)}/commands/#" for g in groups))


def reply_topic(ref: DeviceRef, command_id: str) -> str:
    """Where the device's reply to ``command_id`` goes (the command path reads it there)."""
    return f"{device_root(ref.tenant, ref.device)}/replies/{command_id}"


def map_http(
    ref: DeviceRef,
    channel: Channel,
    payload: bytes,
    received_at_ms: int,
    *,
    topics: Topics,
    max_payload_bytes: int,
) -> KafkaRecord:
    """The bridge's record for this payload on the device's MQTT topic, marked as HTTP's."""
    rec = map_message(
        mqtt_topic(ref, channel),
        payload,
        HTTP_QOS,
        received_at_ms,
        topics=topics,
        max_payload_bytes=max_payload_bytes,
    )
    return as_http(rec)


def as_http(rec: KafkaRecord) -> KafkaRecord:
    """``rec`` with the one header that tells an HTTP device's record from an MQTT one's."""
    return KafkaRecord(
        rec.topic, rec.key, rec.value, [*rec.headers, ADAPTER_HEADER], rec.error, rec.detail,
        rec.tenant,
    )  # fmt: skip


class TtdError(ValueError):
    """An unreadable ``hono-ttd`` header."""


def parse_ttd(text: str | None, cap_s: float) -> float:
    """Hono's time-till-disconnect (whole seconds, ``hono-ttd`` header or query): how long to
    wait for a command, capped at ``cap_s``; 0 = do not wait. ``-1`` (Hono: "as long as the
    adapter allows") is the cap."""
    if text is None or text == "":
        return 0.0
    try:
        value = int(text)
    except ValueError:
        raise TtdError(
            f"hono-ttd must be an integer number of seconds, got {text[:40]!r}"
        ) from None
    if value == -1:
        return cap_s
    if value < 0:
        raise TtdError("hono-ttd must be >= 0 (or -1: the longest allowed)")
    return float(min(value, cap_s))


@dataclass(frozen=True, slots=True)
class HttpCommand:
    """A command as the device receives it over HTTP."""

    name: str
    command_id: str
    attempt: str
    topic: str
    payload: bytes

    def headers(self) -> dict[str, str]:
        return {
            "hono-command": self.name,
            "hono-cmd-req-id": self.command_id,
            "iot-cmd-attempt": self.attempt,
            "iot-cmd-topic": self.topic,
        }


def command_of(
    topic: str,
    payload: bytes,
    user_properties: list[tuple[str, str]],
    correlation: bytes | None,
) -> HttpCommand | None:
    """An MQTT command publish (``.../commands/{name}``, the command path's properties) as
    the HTTP answer carries it; None if it is none (unknown topic shape, no command id)."""
    head, sep, name = topic.rpartition("/commands/")
    if not sep or not head or not name or "/" in name:
        return None
    props = dict(user_properties)
    command_id = props.get("command_id") or (
        correlation.decode("utf-8", "replace") if correlation else ""
    )
    if not command_id or DEVICE_ID_RE.fullmatch(command_id) is None:
        return None
    return HttpCommand(name, command_id, props.get("attempt", "1"), topic, payload)


def command_id_ok(command_id: str) -> bool:
    """A reply's request id is a command id (one MQTT topic level, the command path's rule)."""
    return DEVICE_ID_RE.fullmatch(command_id) is not None


def error_body(code: str, detail: str) -> dict[str, str]:
    """The JSON body of a refused device request: the bridge's error code and its detail."""
    return {"error": code, "detail": detail}


class ReplyError(ValueError):
    """An unreadable ``hono-cmd-status`` header."""


def reply_payload(body: bytes, status: str | None) -> bytes:
    """The MQTT reply payload of a device's HTTP reply. Without ``hono-cmd-status`` the body is
    the reply as an MQTT device sends it (``{"status": "ok", "result": ...}``), passed on as it
    is (the command path judges it). With it (Hono's way: a status code and any body), a body
    that is not already such a reply is wrapped: 2xx -> ``{"status": "ok", "result": body}``,
    else ``{"status": "error", "error": body}`` (JSON as JSON, anything else as text)."""
    if status is None:
        return body
    try:
        code = int(status)
    except ValueError:
        raise ReplyError(f"hono-cmd-status must be an integer, got {status[:40]!r}") from None
    if not 200 <= code <= 599:
        raise ReplyError("hono-cmd-status must be 200-599")
    doc: Any = None
    if body.strip():
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = body.decode("utf-8", "replace")
    if isinstance(doc, dict) and "status" in doc:
        return body
    if 200 <= code < 300:
        return orjson.dumps({"status": "ok", "result": doc})
    return orjson.dumps({"status": "error", "error": doc if doc is not None else str(code)})


def over_quota(
    ref: DeviceRef,
    channel: Channel,
    payload: bytes,
    received_at_ms: int,
    *,
    topics: Topics,
    rate: float,
) -> KafkaRecord:
    """The tenant's DLQ record ``quota_exceeded``, as the bridge writes it (no parsing: a
    rejection must stay cheap), marked as HTTP's."""
    rec = dlq_record(
        tenant_topics(topics, ref.tenant),
        mqtt_topic(ref, channel),
        payload,
        str(received_at_ms).encode(),
        ref.device.encode(),
        rejection=Rejection(
            ErrorCode.QUOTA_EXCEEDED, f"tenant {ref.tenant!r} over its quota of {rate:g} msgs/s"
        ),
        tenant=ref.tenant,
    )
    return as_http(rec)


SCHEMAS: dict[str, dict[str, Any]] = {
    "DeviceError": {
        "type": "object",
        "description": "A refused device request: the bridge's error code (`not_json`, "
        "`missing_field`, `wrong_type`, `oversized`, `quota_exceeded`, ...) and its detail.",
        "required": ["error", "detail"],
        "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
    },
    "DeviceCommand": {
        "type": "object",
        "description": "With a command (200): its arguments with `command_id` (as an MQTT "
        "device gets them); headers `hono-command`, `hono-cmd-req-id`, `iot-cmd-attempt`, "
        "`iot-cmd-topic`. Without one: 202 and an empty body.",
    },
    "DeviceReply": {
        "type": "object",
        "description": '`{"status": "ok" | "error", "result": ..., "error": ...}`, '
        "the MQTT reply contract (docs/commands.md).",
    },
}
