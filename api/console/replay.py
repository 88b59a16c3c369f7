"""Replaying a dead letter (pure): the fixed payload goes through the bridge's own mapping, so
it lands on the topic the bridge would have chosen (or is refused with the bridge's code),
and only within the letter's own tenant (its MQTT topic root names the tenant)."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.mapping import KafkaRecord, Topics, map_message
from bridge.topics import parse_tenant_topic

OTHER_TENANT = "other_tenant"

MAX_PAYLOAD = 1 << 20


@dataclass(frozen=True)
class Refused:
    code: str
    detail: str


def plan_replay(
    mqtt_topic: str,
    payload: bytes,
    *,
    now_ms: int,
    source: str,
    actor: str,
    tenant: str,
    topics: Topics | None = None,
) -> KafkaRecord | Refused:
    """The record to produce for a fixed dead letter of ``tenant`` (from ``source``, its DLQ
    topic/partition-offset), or why it is refused: the bridge's code, or ``other_tenant`` for
    an MQTT topic of another tenant (a letter never moves into another tenant's topics)."""
    parsed = parse_tenant_topic(mqtt_topic)
    if parsed is not None and parsed[0] != tenant:
        return Refused(OTHER_TENANT, f"{mqtt_topic!r} is tenant {parsed[0]}'s, not {tenant}'s")
    record = map_message(
        mqtt_topic, payload, 1, now_ms, topics=topics or Topics(), max_payload_bytes=MAX_PAYLOAD
    )
    if record.error is not None:
        return Refused(record.error.value, record.detail)
    headers = [*record.headers, ("replayed_from", source.encode()),
               ("replayed_by", actor.encode())]  # fmt: skip
    return KafkaRecord(record.topic, record.key, record.value, headers)
