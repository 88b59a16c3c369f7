"""sawmill's facade (contract §10), the pure part: its bodies, its ``token``, offsets, SSE.

sawmill answers ``{"status", "message"}`` objects and JSON arrays of message values; its
``token`` header is mapped onto our credentials (``account:secret`` as Basic, anything else as
a bearer API key). Fixed here: every partition is read (positions are per partition, written
``0:15,1:42``), values that are not JSON come back as strings instead of a 500, and the
``Last-Event-ID`` of a Server-Sent Events stream is that position vector, so a client resumes
where it stopped however partitions interleaved.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

import orjson

MISSING_TOKEN = {"status": "token rejected", "message": "Missing Token!"}
INVALID_TOKEN = {"status": "token rejected", "message": "Invalid Token"}
PUSHED = {"message": "added message to producer", "status": "Pass"}
KAFKA_DOWN = {"message": "kafka not available", "status": "error"}
DEFAULT_LATEST = 10  # /latest: messages
DEFAULT_SINCE_S = 3600  # /latest_time: seconds back
_VECTOR_RE = re.compile(r"^\d+:\d+(,\d+:\d+)*$")


class SawmillError(Exception):
    """An answer other than success, in sawmill's ``{"status", "message"}`` shape."""

    def __init__(self, status: int, body: dict[str, str]) -> None:
        super().__init__(body["message"])
        self.status = status
        self.body = body


def error(status: int, message: str) -> SawmillError:
    return SawmillError(status, {"status": "error", "message": message})


def topic_not_found(topic: str) -> SawmillError:
    return error(404, f"topic {topic} not found")


def authorization_from(token: str | None, authorization: str | None) -> str | None:
    """The ``Authorization`` value sawmill's ``token`` stands for (our Basic or bearer key);
    a request may also carry ``Authorization`` itself. None: no credentials at all."""
    if token:
        if ":" in token:
            return "Basic " + base64.b64encode(token.encode()).decode()
        return f"Bearer {token}"
    return authorization or None


# --- positions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """Where a read starts: ``every`` partition at one offset (sawmill's int), or per
    partition (``at``; partitions not named start at the beginning); ``end`` = new only."""

    every: int | None = None
    at: tuple[tuple[int, int], ...] = ()
    end: bool = False

    def offset_for(self, partition: int, low: int, high: int) -> int:
        if self.end:
            return high
        wanted = dict(self.at).get(partition, self.every if self.every is not None else low)
        return min(max(wanted, low), high)


BEGINNING = Start()


def parse_start(text: str | None) -> Start:
    """``offset``: absent -> the beginning; ``N`` -> offset N of every partition;
    ``0:15,1:42`` -> per partition; ``end`` -> only what comes next. Else 400."""
    if text is None or text == "":
        return BEGINNING
    text = text.strip()
    if text in ("end", "latest"):
        return Start(end=True)
    if text.isdigit():
        return Start(every=int(text))
    vector = parse_vector(text)
    if vector is None:
        raise error(400, "offset must be an offset, partition:offset,... or end")
    return Start(at=tuple(sorted(vector.items())))


def parse_vector(text: str) -> dict[int, int] | None:
    """``0:15,1:42`` -> {0: 15, 1: 42}; anything else -> None."""
    text = text.strip()
    if not _VECTOR_RE.match(text):
        return None
    pairs = (item.split(":") for item in text.split(","))
    return {int(p): int(o) for p, o in pairs}


def format_vector(positions: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def parse_count(text: str | None, default: int, name: str) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise error(400, f"{name} must be a whole number") from None
    if value < 0:
        raise error(400, f"{name} must not be negative")
    return value


# --- values ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    partition: int
    offset: int
    timestamp_ms: int
    value: bytes
    key: bytes | None = None  # the device telemetry stream filters by it


def decoded(value: bytes) -> Any:
    """A stored value as sawmill hands it out: its JSON, or (DEV) its text when not JSON."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value.decode("utf-8", "replace")


def in_time_order(messages: list[Message]) -> list[Message]:
    """Partitions merged by record time (each partition keeps its own order)."""
    return sorted(messages, key=lambda m: (m.timestamp_ms, m.partition, m.offset))


def next_positions(starts: dict[int, int], returned: list[Message]) -> dict[int, int]:
    """Each partition's next offset after ``returned`` (its start when none came from it)."""
    positions = dict(starts)
    for m in returned:
        positions[m.partition] = max(positions.get(m.partition, 0), m.offset + 1)
    return positions


def push_value(body: bytes) -> bytes:
    """/push: the JSON body, stored compact (sawmill json.dumps the parsed body)."""
    try:
        return orjson.dumps(orjson.loads(body))
    except orjson.JSONDecodeError:
        raise error(400, "the body must be JSON") from None


# --- Server-Sent Events ---------------------------------------------------------------------

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # no proxy buffering of the stream
}


def sse_event(event_id: str, value: bytes) -> bytes:
    """One event: the resume position and the value as one JSON line."""
    return b"id: " + event_id.encode() + b"\ndata: " + orjson.dumps(decoded(value)) + b"\n\n"


def sse_retry(ms: int) -> bytes:
    return f"retry: {ms}\n\n".encode()


SSE_HEARTBEAT = b": keep-alive\n\n"


def resume_start(last_event_id: str | None, offset: str | None) -> Start:
    """``Last-Event-ID`` (the vector of the last event received) wins over ``offset``."""
    if last_event_id:
        vector = parse_vector(last_event_id)
        if vector is None:
            raise error(400, "Last-Event-ID is not a position of this stream")
        return Start(at=tuple(sorted(vector.items())))
    return parse_start(offset)


SCHEMAS: dict[str, dict[str, Any]] = {
    "SawmillStatus": {
        "type": "object",
        "description": "sawmill's answer and error body.",
        "properties": {"status": {"type": "string"}, "message": {"type": "string"}},
    },
    "SawmillMessages": {
        "type": "array",
        "description": "Message values: JSON values as stored, other values as strings.",
        "items": {},
    },
    "SawmillTopics": {"type": "array", "items": {"type": "string"}},
}
