"""The hot path's shortcut for the common message (pure, no client imports).

Most messages are valid telemetry or events of a device whose tenant's topics exist. For
those the bridge needs no :class:`~bridge.mapping.KafkaRecord`, no rejection and no second
look at the topic: :func:`route_for` computes once per MQTT topic what every record of that
topic shares (Kafka topic, key, header tuples, stats labels), and :func:`accepts` checks a
parsed payload in one pass. Only what :func:`bridge.mapping.map_message` would map to the very
same record is accepted; anything else (rejections, status messages, oversized payloads) goes
the general way, which alone decides the DLQ record and its error code.
"""

from __future__ import annotations

import math
import sys
from typing import Annotated, Any, Final, NamedTuple

import msgspec
import orjson

from bridge.mapping import Topics, tenant_topics
from bridge.topics import DEFAULT_TENANT, Channel, parse_device_topic_cached

QOS_HEADERS: Final = (("qos", b"0"), ("qos", b"1"), ("qos", b"2"))


class Route(NamedTuple):
    """What all messages of one MQTT topic share. ``fast`` is False for a topic whose
    messages always go the general way (not a device topic, status, tenant not ready)."""

    fast: bool
    kafka_topic: str
    key: bytes | None
    topic_header: tuple[str, bytes]
    tenant_header: tuple[str, bytes] | None  # None for the default tenant
    kind: str  # the stats' topic kind (telemetry/events)
    channel: str  # the stats' channel (the topic's last level)
    tenant: str
    device_id: str
    telemetry: bool
    # the sparse delivery reports' state of the record's Kafka partition (bridge.pending),
    # set by the pipeline when it knows the topic's partition count; None: a report per record
    queue: Any = None


def route_for(
    topic: str, topics: Topics, ready_tenants: frozenset[str], kinds: dict[str, str]
) -> Route:
    """The route of ``topic`` for the default tenant's ``topics``, given the tenants whose
    Kafka topics exist and the stats' kind of each Kafka topic name."""
    channel = topic.rsplit("/", 1)[-1]
    parsed = parse_device_topic_cached(topic)
    if parsed is None:
        return Route(False, "", None, ("", b""), None, "", channel, DEFAULT_TENANT, "", False)
    device_id, chan, key, topic_bytes, tenant = parsed
    own = tenant_topics(topics, tenant)
    kafka_topic = own.telemetry if chan is Channel.TELEMETRY else own.events
    kind = kinds.get(kafka_topic)
    fast = chan is not Channel.STATUS and tenant in ready_tenants and kind is not None
    return Route(
        fast,
        kafka_topic,
        key,
        ("mqtt_topic", topic_bytes),
        None if tenant == DEFAULT_TENANT else ("tenant", tenant.encode()),
        kind or "",
        channel,
        tenant,
        device_id,
        chan is Channel.TELEMETRY,
    )


# Typed decoders for the common message: msgspec checks the types while it parses and builds
# no dict for the envelope, about 0.35 us less per message than orjson.loads + accepts(). They
# may only ever say yes where accepts() says yes: every bound is one orjson keeps (its ints are
# int64/uint64, beyond that it makes floats; a float must be finite), duplicate keys fail the
# struct, and non-ASCII payloads skip them (msgspec does not check UTF-8 in fields it skips).
# Whatever they refuse goes to orjson and accepts(), which decide as before.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_Finite = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]


class _Telemetry(msgspec.Struct):
    ts: _Int
    seq: _Seq
    metrics: dict[str, _Int | _Finite]
    tags: dict[str, Any] | None = None
    device_id: str | None = None


class _Event(msgspec.Struct):
    ts: _Int
    seq: _Seq
    type: Annotated[str, msgspec.Meta(min_length=1)]
    device_id: str | None = None


_DECODE_TELEMETRY = msgspec.json.Decoder(_Telemetry).decode
_DECODE_EVENT = msgspec.json.Decoder(_Event).decode


def accepts_payload(payload: bytes, device_id: str, telemetry: bool) -> bool:
    """:func:`accepts` of the parsed ``payload`` (False if it is not JSON; the general path
    then tells garbage from non-finite numbers). The typed decoders answer first; what they
    refuse, orjson and :func:`accepts` decide."""
    if payload.isascii():
        try:
            doc = _DECODE_TELEMETRY(payload) if telemetry else _DECODE_EVENT(payload)
        except (msgspec.DecodeError, RecursionError):
            pass
        else:
            claimed = doc.device_id
            return claimed is None or claimed == device_id
    return orjson_accepts_payload(payload, device_id, telemetry)


def orjson_accepts_payload(payload: bytes, device_id: str, telemetry: bool) -> bool:
    """:func:`accepts` of ``payload`` parsed by orjson, the general mapping's parser."""
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return accepts(doc, device_id, telemetry)


def accepts(doc: Any, device_id: str, telemetry: bool) -> bool:
    """True only if ``doc`` passes :func:`bridge.mapping.validate_telemetry` (or
    ``validate_event``) and names no other device than ``device_id``; the same checks in one
    pass, with no rejection built (the general path builds it when this says False)."""
    if type(doc) is not dict:
        return False
    ts = doc.get("ts")
    seq = doc.get("seq")
    if type(ts) is not int or type(seq) is not int or seq < 0:
        return False
    if telemetry:
        metrics = doc.get("metrics")
        if type(metrics) is not dict:
            return False
        for value in metrics.values():
            kind = type(value)
            if kind is float:
                if not math.isfinite(value):
                    return False
            elif kind is not int:
                return False
        tags = doc.get("tags")
        if tags is not None and type(tags) is not dict:
            return False
    else:
        event = doc.get("type")
        if type(event) is not str or not event:
            return False
    claimed = doc.get("device_id")
    return claimed is None or claimed == device_id
