"""Kafka event records -> accountant rows for one run (the events topic, ``iot.events``).

An event of the run is a JSON object whose ``data.run`` is the run id (see
:mod:`device_sim.events`); its ``seq`` is the device's own events sequence, so the events go
through an :class:`~device_sim.accounting.Accountant` of their own, exactly as telemetry does.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from confluent_kafka import Message

from device_sim.accounting import Row


class _Data(msgspec.Struct):
    run: Any = None


class _Event(msgspec.Struct):
    ts: Any = None
    seq: Any = None
    data: Any = None


_decode_event = msgspec.json.Decoder(_Event).decode


def event_fields(value: bytes, run_id: str) -> tuple[int, int | None] | None:
    """``(seq, ts)`` of an event payload of ``run_id``, else None (another run's, or junk)."""
    try:
        doc = _decode_event(value)
    except msgspec.MsgspecError:
        return None
    data = doc.data
    if not isinstance(data, dict) or data.get("run") != run_id:
        return None
    seq, ts = doc.seq, doc.ts
    if not isinstance(seq, int) or isinstance(seq, bool):
        return None
    return seq, ts if isinstance(ts, int) and not isinstance(ts, bool) else None


def _received_at(headers: Any) -> int | None:
    for key, value in headers or ():
        if key == "received_at" and value:
            try:
                return int(value)
            except ValueError:
                return None
    return None


class EventRows:
    """Kafka messages -> rows ``(device, seq, partition, kafka_ts, ts, received_at)``."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.needle = orjson.dumps(run_id)  # the run id as it appears in the JSON
        self._names: dict[bytes, str] = {}

    def __call__(self, batch: list[Message]) -> list[Row]:
        rows: list[Row] = []
        for msg in batch:
            value = msg.value()
            key = msg.key()
            if value is None or not key or self.needle not in value:
                continue
            fields = event_fields(value, self.run_id)
            if fields is None:
                continue
            device = self._names.get(key)
            if device is None:
                device = self._names[key] = key.decode("utf-8", errors="replace")
            partition = msg.partition()
            assert partition is not None  # a fetched record has one
            seq, ts = fields
            received_at = _received_at(msg.headers())
            rows.append((device, seq, partition, msg.timestamp()[1], ts, received_at))
        return rows
