"""MQTT message -> Kafka record: validation and record building (pure, no client imports).

Errors are data: :func:`map_message` never raises for bad input; it returns a
:class:`KafkaRecord` for the DLQ with an error code. Codes (``ErrorCode``):

``bad_topic``, ``oversized``, ``not_json``, ``non_finite``, ``not_object``, ``missing_field``,
``wrong_type``, ``device_mismatch``, ``bad_status``; and from the pipeline ``quota_exceeded``
(the tenant's messages/s quota) and ``tenant_not_ready`` (its Kafka topics not yet checked).

Tenants: a default-tenant record is exactly as before (design.md's topics and headers). A
record of tenant ``t`` (topic root ``tenants/{t}/``) goes to ``t``'s own topics
(:func:`bridge.topics.tenant_kafka_topic`: ``iot.t.telemetry``, ``iot.t.dlq``, ...) and carries
the header ``tenant``; its key and value are as for the default tenant.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Final, NamedTuple

import orjson

from bridge.topics import (
    DEFAULT_TENANT,
    Channel,
    device_id_hint,
    parse_device_topic_cached,
    tenant_kafka_topic,
)


class ErrorCode(StrEnum):
    """Machine codes of rejected input (the ``error`` header in the DLQ)."""

    BAD_TOPIC = "bad_topic"
    OVERSIZED = "oversized"
    NOT_JSON = "not_json"
    NON_FINITE = "non_finite"
    NOT_OBJECT = "not_object"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    DEVICE_MISMATCH = "device_mismatch"
    BAD_STATUS = "bad_status"
    QUOTA_EXCEEDED = "quota_exceeded"
    TENANT_NOT_READY = "tenant_not_ready"


Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Topics:
    """Kafka topic names the mapping writes to."""

    telemetry: str = "iot.telemetry"
    events: str = "iot.events"
    dlq: str = "iot.dlq"
    presence: str = "iot.presence"

    def all(self) -> tuple[str, str, str, str]:
        return (self.telemetry, self.events, self.dlq, self.presence)


@lru_cache(maxsize=4096)
def tenant_topics(base: Topics, tenant: str) -> Topics:
    """The Kafka topics of ``tenant`` (``base`` itself for the default tenant)."""
    if tenant == DEFAULT_TENANT:
        return base
    return Topics(*(tenant_kafka_topic(name, tenant) for name in base.all()))


class KafkaRecord(NamedTuple):
    """One record to produce. ``error`` is set (and ``topic`` is the DLQ) for rejected input.

    A named tuple, not a frozen dataclass: one is built per message, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (measured: the largest single
    cost of the mapping)."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers
    error: ErrorCode | None = None
    detail: str = ""
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a payload was rejected."""

    code: ErrorCode
    detail: str


_QOS_BYTES: Final = (b"0", b"1", b"2")
_STATUS_VALUES: Final = {b"online": True, b"offline": False}


def validate_telemetry(doc: Any) -> Rejection | None:
    """Check a parsed telemetry document; None if valid."""
    bad = _check_envelope(doc, "metrics")
    if bad is not None:
        return bad
    metrics = doc["metrics"]
    if type(metrics) is not dict:
        return Rejection(ErrorCode.WRONG_TYPE, "'metrics' must be an object")
    for name, value in metrics.items():
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):  # pragma: no cover - orjson never yields inf/nan
                return Rejection(ErrorCode.NON_FINITE, f"metric {name!r} is not finite")
        elif kind is not int:
            return Rejection(ErrorCode.WRONG_TYPE, f"metric {name!r} must be a number")
    tags = doc.get("tags")
    if tags is not None and type(tags) is not dict:
        return Rejection(ErrorCode.WRONG_TYPE, "'tags' must be an object")
    return None


def validate_event(doc: Any) -> Rejection | None:
    """Check a parsed event document; None if valid."""
    bad = _check_envelope(doc, "type")
    if bad is not None:
        return bad
    kind = doc["type"]
    if type(kind) is not str or not kind:
        return Rejection(ErrorCode.WRONG_TYPE, "'type' must be a non-empty string")
    return None


def _check_envelope(doc: Any, body: str) -> Rejection | None:
    """What telemetry and events share: a JSON object with an int `ts`, an int `seq` >= 0 and
    the field ``body`` of its kind (`metrics`, `type`)."""
    if type(doc) is not dict:
        return Rejection(
            ErrorCode.NOT_OBJECT, f"payload is a JSON {_json_kind(doc)}, not an object"
        )
    if "ts" not in doc:
        return Rejection(ErrorCode.MISSING_FIELD, "missing field 'ts'")
    if type(doc["ts"]) is not int:
        return Rejection(ErrorCode.WRONG_TYPE, "'ts' must be an integer (epoch ms)")
    if "seq" not in doc:
        return Rejection(ErrorCode.MISSING_FIELD, "missing field 'seq'")
    seq = doc["seq"]
    if type(seq) is not int or seq < 0:
        return Rejection(ErrorCode.WRONG_TYPE, "'seq' must be an integer >= 0")
    if body not in doc:
        return Rejection(ErrorCode.MISSING_FIELD, f"missing field {body!r}")
    return None


def _json_kind(doc: Any) -> str:
    if isinstance(doc, list):
        return "array"
    if isinstance(doc, str):
        return "string"
    if isinstance(doc, bool):
        return "boolean"
    if doc is None:
        return "null"
    return "number"


def parse_json(payload: bytes) -> tuple[Any, Rejection | None]:
    """Parse JSON; tells apart non-finite numbers (NaN, Infinity, 1e999) from garbage."""
    try:
        return orjson.loads(payload), None
    except orjson.JSONDecodeError as exc:
        try:
            json.loads(payload)
        except (ValueError, RecursionError):
            return None, Rejection(ErrorCode.NOT_JSON, f"not JSON: {exc}")
        return None, Rejection(ErrorCode.NON_FINITE, "contains a non-finite number (NaN/Infinity)")


def map_message(
    topic: str,
    payload: bytes,
    qos: int,
    received_at_ms: int,
    *,
    topics: Topics,
    max_payload_bytes: int,
) -> KafkaRecord:
    """Map one MQTT message to the Kafka record to produce (a DLQ record when rejected).

    ``topics`` are the default tenant's; another tenant's record goes to its own topics.
    Never raises for any ``topic``/``payload``.
    """
    received = _received_bytes(received_at_ms)
    parsed = parse_device_topic_cached(topic)
    if parsed is None:
        hint = device_id_hint(topic)
        return dlq_record(
            topics,
            topic,
            payload,
            received,
            None if hint is None else hint.encode(),
            rejection=Rejection(ErrorCode.BAD_TOPIC, "topic is not devices/{device_id}/{channel}"),
        )
    tenant = parsed[4]
    rec = _map_parsed(
        topic,
        payload,
        parsed,
        qos=qos,
        received_at_ms=received_at_ms,
        received=received,
        topics=topics if tenant == DEFAULT_TENANT else tenant_topics(topics, tenant),
        max_payload_bytes=max_payload_bytes,
    )
    return with_tenant(rec, tenant)


_last_received: list[Any] = [-1, b""]  # the last (ms, bytes): messages of one ms share them


def _received_bytes(received_at_ms: int) -> bytes:
    last = _last_received
    if last[0] != received_at_ms:
        last[0] = received_at_ms
        last[1] = str(received_at_ms).encode()
    value: bytes = last[1]
    return value


def with_tenant(rec: KafkaRecord, tenant: str) -> KafkaRecord:
    """``rec`` marked as ``tenant``'s: the ``tenant`` header (none for the default tenant)."""
    if tenant == DEFAULT_TENANT:
        return rec
    return KafkaRecord(
        rec.topic,
        rec.key,
        rec.value,
        [*rec.headers, ("tenant", tenant.encode())],
        rec.error,
        rec.detail,
        tenant,
    )


def _map_parsed(
    topic: str,
    payload: bytes,
    parsed: tuple[str, Channel, bytes, bytes, str],
    *,
    qos: int,
    received_at_ms: int,
    received: bytes,
    topics: Topics,
    max_payload_bytes: int,
) -> KafkaRecord:
    device_id, channel, key, topic_bytes, _tenant = parsed
    bad: Rejection | None
    if len(payload) > max_payload_bytes:
        bad = Rejection(
            ErrorCode.OVERSIZED, f"payload {len(payload)} bytes > limit {max_payload_bytes}"
        )
    elif channel is Channel.STATUS:
        online = _STATUS_VALUES.get(payload.strip().strip(b'"'))
        if online is not None:
            value = orjson.dumps({"online": online, "at": received_at_ms})
            return KafkaRecord(topics.presence, key, value, _headers(topic_bytes, received, qos))
        bad = Rejection(ErrorCode.BAD_STATUS, "status payload must be 'online' or 'offline'")
    else:
        doc, bad = parse_json(payload)
        if bad is None:
            if channel is Channel.TELEMETRY:
                bad = validate_telemetry(doc)
                out_topic = topics.telemetry
            else:
                bad = validate_event(doc)
                out_topic = topics.events
            if bad is None:
                claimed = doc.get("device_id")
                if claimed is None or claimed == device_id:
                    headers = _headers(topic_bytes, received, qos)
                    return KafkaRecord(out_topic, key, payload, headers)
                bad = Rejection(
                    ErrorCode.DEVICE_MISMATCH,
                    f"payload device_id {str(claimed)[:140]!r} != topic device id {device_id!r}",
                )
    assert bad is not None
    return dlq_record(topics, topic, payload, received, key, rejection=bad)


def _headers(topic_bytes: bytes, received: bytes, qos: int) -> Headers:
    """The headers of an accepted record: its MQTT topic, when it arrived, its QoS."""
    qos_bytes = _QOS_BYTES[qos] if 0 <= qos <= 2 else str(qos).encode()
    return [("mqtt_topic", topic_bytes), ("received_at", received), ("qos", qos_bytes)]


def dlq_record(
    topics: Topics,
    mqtt_topic: str,
    payload: bytes,
    received: bytes,
    key: bytes | None,
    *,
    rejection: Rejection,
    tenant: str = DEFAULT_TENANT,
) -> KafkaRecord:
    """The DLQ record for a rejected message: original bytes, error headers (and ``tenant``
    for another tenant than the default: its own DLQ when ``topics`` are its topics)."""
    return with_tenant(
        KafkaRecord(
            topics.dlq,
            key,
            payload,
            [
                ("mqtt_topic", mqtt_topic.encode("utf-8", "replace")),
                ("error", rejection.code.value.encode()),
                ("error_detail", rejection.detail.encode("utf-8", "replace")),
                ("received_at", received),
            ],
            rejection.code,
            rejection.detail,
        ),
        tenant,
    )
