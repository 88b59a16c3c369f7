"""Kafka records as the console hands them on (pure): what a read found, what a backward
scan found and its bounds, and a record as the pages' JSON (its value pretty-printed when it is
JSON, as text when it is UTF-8, else base64)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Raw:
    """One record as read, for the callers' own parsing."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any
    timestamp: int


@dataclass(frozen=True, slots=True)
class Scan:
    """What a backward scan found: the matching records (newest first) and how far it read."""

    matched: list[Raw]
    scanned: int
    complete: bool  # the whole asked range was read
    oldest_ms: int | None  # timestamp of the oldest record read


# A backward scan reads at most this many records in one request (bounded answer time).
SCAN_MAX_RECORDS = 60_000
SCAN_CHUNK = 2_000  # records per partition and round
SCAN_BUDGET_S = 10.0


def pretty(value: bytes | None) -> tuple[str, bool]:
    if value is None:
        return "", False
    try:
        return orjson.dumps(orjson.loads(value), option=orjson.OPT_INDENT_2).decode(), True
    except orjson.JSONDecodeError:
        pass
    try:
        return value.decode("utf-8"), False
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode(), False


def as_json(raw: Raw) -> dict[str, Any]:
    text, is_json = pretty(raw.value)
    return {
        "partition": raw.partition,
        "offset": raw.offset,
        "timestamp": raw.timestamp,
        "key": raw.key.decode("utf-8", "replace") if raw.key is not None else None,
        "headers": {k: (v or b"").decode("utf-8", "replace") for k, v in raw.headers or []},
        "value": text,
        "json": is_json,
    }
