"""Replaying a dead letter (pure): the fixed payload goes through the bridge's own mapping, so
it lands on the topic the bridge would have chosen (or is refused with the bridge's code)."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.mapping import KafkaRecord, Topics, map_message

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
    ref: str,
    actor: str,
    topics: Topics | None = None,
) -> KafkaRecord | Refused:
    """The record to produce for a fixed dead letter, or why the bridge would refuse it."""
    record = map_message(
        mqtt_topic, payload, 1, now_ms, topics=topics or Topics(), max_payload_bytes=MAX_PAYLOAD
    )
    if record.error is not None:
        return Refused(record.error.value, record.detail)
    headers = [*record.headers, ("replayed_from", f"iot.dlq/{ref}".encode()),
               ("replayed_by", actor.encode())]  # fmt: skip
    return KafkaRecord(record.topic, record.key, record.value, headers)
