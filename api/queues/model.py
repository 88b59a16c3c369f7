"""Queues with per-message acknowledgement, the pure part: markers, receipt handles, the table
of messages in flight and when each is due again (kmq's model; docs/api.md "Queues").

A queue is a topic ``q`` (its messages) with a dead-letter topic ``q.dlq``. Its messages'
fate after a receive lives in one markers topic, keyed ``q/partition`` so that everything about
one message lands in one marker partition, in order:

- ``start``: handed out (token, visibility deadline, delivery count, the message itself);
- ``ack`` / ``nack``: the receiver's answer for that token (a ``nack`` may name when the
  message is due again: AMQP's ``modified``, after the visibility timeout);
- ``reject``: straight to the dead-letter topic at the owner's next tick (AMQP's ``rejected``);
- ``renew``: a later deadline for a delivery still held (an AMQP transfer still unsettled);
- ``done``: the owner of the marker partition redelivered it (a copy appended to ``q`` with its
  delivery count) or dead-lettered it;
- ``tick``: the owner's clock, written to its own partition and acted on when read back, so
  every ack that Kafka acknowledged before the tick's time is seen before the owner acts.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

START, ACK, NACK, DONE, TICK = "start", "ack", "nack", "done", "tick"
REJECT, RENEW = "reject", "renew"
COUNT_HEADER = "iot-delivery-count"  # deliveries a copy already had (absent: none)


def dead_letter_topic(queue: str) -> str:
    return f"{queue}.dlq"


def marker_key(queue: str, partition: int) -> bytes:
    return f"{queue}/{partition}".encode()


def delivery_count(headers: Any) -> int:
    """Deliveries a record already had (its copy's header), 0 for an original."""
    pairs = headers.items() if isinstance(headers, dict) else headers or []
    for name, value in pairs:
        if name == COUNT_HEADER and isinstance(value, (bytes, str)):
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


@dataclass(frozen=True, slots=True)
class Handle:
    """What a receipt handle names: one delivery of one message."""

    queue: str
    partition: int
    offset: int
    token: str
    deadline_ms: int
    count: int

    def encode(self) -> str:
        raw = orjson.dumps(
            [self.queue, self.partition, self.offset, self.token, self.deadline_ms, self.count]
        )
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_handle(text: str) -> Handle | None:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        q, p, o, t, d, c = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        return None
    fields = (q, t), (p, o, d, c)
    if not all(isinstance(x, str) for x in fields[0]):
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in fields[1]):
        return None
    return Handle(q, p, o, t, d, c)


# --- markers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Marker:
    kind: str
    token: str = ""
    queue: str = ""
    partition: int = 0
    offset: int = 0
    deadline_ms: int = 0
    count: int = 0
    max_deliveries: int = 0
    key: bytes | None = None
    value: bytes = b""
    owner: str = ""  # tick: the writer's assignment generation
    now_ms: int = 0  # tick: the writer's clock
    why: str = ""  # done: redelivered or dead-lettered


def start_marker(handle: Handle, max_deliveries: int, key: bytes | None, value: bytes) -> bytes:
    meta = {
        "k": START, "t": handle.token, "q": handle.queue, "p": handle.partition,
        "o": handle.offset, "d": handle.deadline_ms, "c": handle.count, "m": max_deliveries,
        "key": None if key is None else base64.b64encode(key).decode(),
    }  # fmt: skip
    return orjson.dumps(meta) + b"\n" + value  # the message travels with its start


def answer_marker(kind: str, handle: Handle, due_ms: int = 0) -> bytes:
    """``ack``, ``nack`` (due again at ``due_ms``; 0: at once), ``reject`` or ``renew`` (its
    new deadline ``due_ms``)."""
    if due_ms:
        return orjson.dumps({"k": kind, "t": handle.token, "d": due_ms})
    return orjson.dumps({"k": kind, "t": handle.token})


def done_marker(token: str, why: str) -> bytes:
    return orjson.dumps({"k": DONE, "t": token, "why": why})


def tick_marker(owner: str, now_ms: int) -> bytes:
    return orjson.dumps({"k": TICK, "owner": owner, "now": now_ms})


def decode_marker(raw: bytes) -> Marker | None:
    head, _, value = raw.partition(b"\n")
    try:
        meta: dict[str, Any] = orjson.loads(head)
        kind = meta["k"]
        if kind == START:
            key = meta.get("key")
            return Marker(
                START, meta["t"], meta["q"], int(meta["p"]), int(meta["o"]), int(meta["d"]),
                int(meta["c"]), int(meta["m"]), None if key is None else base64.b64decode(key),
                value,
            )  # fmt: skip
        if kind in (ACK, NACK, REJECT, RENEW):
            return Marker(kind, meta["t"], deadline_ms=int(meta.get("d", 0)))
        if kind == DONE:
            return Marker(DONE, meta["t"], why=meta.get("why", ""))
        if kind == TICK:
            return Marker(TICK, owner=meta["owner"], now_ms=int(meta["now"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, binascii.Error):
        return None
    return None


# --- one marker partition's table -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InFlight:
    marker_offset: int  # where its start is (the partition is re-read from the oldest)
    start: Marker
    due_ms: int  # deadline, or 0 once nacked (or the nack's own time)
    dead: bool = False  # rejected: to the dead-letter topic whatever its count


@dataclass(frozen=True, slots=True)
class Redelivery:
    """What the owner does with a message whose time is up."""

    token: str
    queue: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    count: int  # deliveries so far
    dead: bool  # the maximum reached: to the dead-letter topic

    @property
    def topic(self) -> str:
        return dead_letter_topic(self.queue) if self.dead else self.queue


@dataclass
class MarkerTable:
    """The messages in flight of one marker partition, rebuilt by reading it from
    :meth:`low_water` on; ``next_offset`` is the next marker to read."""

    next_offset: int = 0
    pending: dict[str, InFlight] = field(default_factory=dict)

    def apply(self, offset: int, marker: Marker) -> None:
        self.next_offset = max(self.next_offset, offset + 1)
        if marker.kind == START:
            self.pending[marker.token] = InFlight(offset, marker, marker.deadline_ms)
        elif marker.kind in (ACK, DONE):
            self.pending.pop(marker.token, None)
        elif marker.kind == NACK and marker.token in self.pending:
            found = self.pending[marker.token]
            self.pending[marker.token] = replace(found, due_ms=marker.deadline_ms)
        elif marker.kind == RENEW and marker.token in self.pending:
            found = self.pending[marker.token]
            if found.due_ms and not found.dead:  # a nack or reject already decided it
                self.pending[marker.token] = replace(found, due_ms=marker.deadline_ms)
        elif marker.kind == REJECT and marker.token in self.pending:
            self.pending[marker.token] = replace(self.pending[marker.token], due_ms=0, dead=True)

    def anything_due(self, now_ms: int, grace_ms: int) -> bool:
        return any(f.due_ms + grace_ms <= now_ms for f in self.pending.values())

    def due(self, tick_ms: int, grace_ms: int) -> list[Redelivery]:
        """Those whose deadline (plus the clock grace) is before ``tick_ms``, oldest first."""
        found = [f for f in self.pending.values() if f.due_ms + grace_ms <= tick_ms]
        found.sort(key=lambda f: f.marker_offset)
        return [
            Redelivery(
                f.start.token,
                f.start.queue,
                f.start.partition,
                f.start.offset,
                f.start.key,
                f.start.value,
                f.start.count,
                f.dead or f.start.count >= f.start.max_deliveries,
            )
            for f in found
        ]

    def settle(self, token: str) -> None:
        self.pending.pop(token, None)

    def low_water(self) -> int:
        """The offset to re-read this partition from: its oldest start still in flight."""
        if not self.pending:
            return self.next_offset
        return min(f.marker_offset for f in self.pending.values())


# --- a queue's own settings -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's visibility timeout (a receive without ``visibility``) and deliveries before
    its dead-letter topic; kept on the compacted queue-settings topic keyed by queue."""

    visibility_s: float
    max_deliveries: int

    def encode(self) -> bytes:
        return orjson.dumps({"visibilityTimeoutS": self.visibility_s,
                             "maxDeliveries": self.max_deliveries})  # fmt: skip


def decode_settings(raw: bytes | None) -> QueueSettings | None:
    """A record of the settings topic; None for a tombstone or anything unreadable."""
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
        found = QueueSettings(float(data["visibilityTimeoutS"]), int(data["maxDeliveries"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return found if found.visibility_s > 0 and found.max_deliveries >= 1 else None


def settings_change(
    base: QueueSettings, visibility: object, max_deliveries: object, max_visibility_s: float
) -> QueueSettings | str:
    """``base`` with the given values (None: unchanged; numbers or numeric strings, as query
    parameters or JSON); the problem as text when one is out of range."""
    visibility_s, deliveries = base.visibility_s, base.max_deliveries
    try:
        if visibility is not None and visibility != "":
            if isinstance(visibility, bool):
                raise TypeError
            visibility_s = float(visibility)  # type: ignore[arg-type]
        if max_deliveries is not None and max_deliveries != "":
            if isinstance(max_deliveries, bool) or (
                isinstance(max_deliveries, float) and not max_deliveries.is_integer()
            ):
                raise TypeError
            deliveries = int(max_deliveries)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return "visibilityTimeoutS must be a number and maxDeliveries a whole number"
    if not 0 < visibility_s <= max_visibility_s:
        return f"visibilityTimeoutS must be seconds in (0, {max_visibility_s}]"
    if not 1 <= deliveries <= 1000:
        return "maxDeliveries must be 1-1000"
    return QueueSettings(visibility_s, deliveries)


# --- request parameters ---------------------------------------------------------------------


def visibility_ms(text: str | None, default_s: float, max_s: float) -> int | None:
    """``visibility`` in seconds (fractions allowed); None when not a number in (0, max]."""
    if text is None or text == "":
        return int(default_s * 1000)
    try:
        seconds = float(text)
    except ValueError:
        return None
    if not 0 < seconds <= max_s:
        return None
    return int(seconds * 1000)


def handles_of(body: bytes) -> list[str] | None:
    """``{"receiptHandles": ["...", ...]}`` -> the handles; None when not that shape."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    handles = data.get("receiptHandles") if isinstance(data, dict) else None
    if not isinstance(handles, list) or not all(isinstance(h, str) for h in handles):
        return None
    return handles


SCHEMAS: dict[str, dict[str, Any]] = {
    "Queue": {
        "type": "object",
        "properties": {
            "queue": {"type": "string"},
            "deadLetterTopic": {"type": "string"},
            "partitions": {"type": "integer"},
            "maxDeliveries": {"type": "integer"},
            "visibilityTimeoutS": {"type": "number"},
        },
    },
    "QueueMessages": {
        "type": "object",
        "properties": {
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "receiptHandle": {"type": "string"},
                        "message": {"type": "string"},
                        "deliveryCount": {"type": "integer"},
                        "partition": {"type": "integer"},
                        "offset": {"type": "integer"},
                        "visibleAgainMs": {"type": "integer"},
                    },
                },
            }
        },
    },
    "QueueSettings": {
        "type": "object",
        "properties": {
            "visibilityTimeoutS": {"type": "number"},
            "maxDeliveries": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
    },
    "ReceiptHandles": {
        "type": "object",
        "required": ["receiptHandles"],
        "properties": {"receiptHandles": {"type": "array", "items": {"type": "string"}}},
    },
    "AckResults": {
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "receiptHandle": {"type": "string"},
                        "status": {
                            "type": "string",
                            "enum": ["acked", "nacked", "expired", "invalid"],
                        },
                    },
                },
            }
        },
    },
}
