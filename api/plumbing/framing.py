"""Publish bodies -> Kafka records, per Content-Type (contract §2.1). Pure: bytes in, records out.

- ``application/json``: one object or an array of objects, each re-serialized compactly; its
  ``cambria.partition`` string field is its key, else ``partitionKey``.
- ``text/plain``: one message per line (``\\n``, ``\\r\\n`` or ``\\r``); a final newline adds no
  empty message, interior empty lines do (as MR).
- ``application/cambria``: records ``<keyLen>.<msgLen>.<key><msg>``, byte counts, whitespace
  allowed before each; ``partitionKey`` is ignored (as MR); raw bytes kept (DEV).
- ``application/cambria-zip``: gzip of the above.
- anything else: the whole body is one message.

A record without a key of its own gets ``partitionKey``, else none (Kafka spreads keyless records
as MR's current-millis key does).
"""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple

import orjson

from api.errors import (
    INCORRECT_JSON,
    MSG_SIZE_EXCEEDS,
    MSG_SIZE_EXCEEDS_BATCH_LIMIT,
    MSG_SIZE_EXCEEDS_MSG_LIMIT,
    ApiError,
    bad_framing,
)

JSON = "application/json"
TEXT = "text/plain"
CAMBRIA = "application/cambria"
CAMBRIA_ZIP = "application/cambria-zip"
CAMBRIA_MAX_LENGTH = 4_096_000  # the reference reader's bound on one length field
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_WHITESPACE = b" \t\r\n\x0b\x0c"


class Record(NamedTuple):
    """One Kafka record to publish (a tuple: built ~100 times a request, a frozen dataclass's
    ``__init__`` cost more than parsing the JSON it holds)."""

    key: bytes | None
    value: bytes


def media_type(content_type: str | None) -> str:
    """``application/json; charset=UTF-8`` -> ``application/json``; none -> octet-stream."""
    if not content_type:
        return "application/octet-stream"
    return content_type.split(";", 1)[0].strip().lower()


def parse_body(
    content_type: str | None,
    body: bytes,
    partition_key: str | None,
    *,
    max_message_bytes: int,
    max_request_bytes: int,
) -> list[Record]:
    """The records a publish body carries, each within ``max_message_bytes`` (else 413)."""
    kind = media_type(content_type)
    default_key = partition_key.encode() if partition_key else None
    if kind == JSON:
        records = parse_json(body, default_key)
    elif kind == TEXT:
        records = [Record(default_key, line) for line in split_lines(body)]
    elif kind == CAMBRIA:
        records = parse_cambria(body)
    elif kind == CAMBRIA_ZIP:
        records = parse_cambria(gunzip(body, max_request_bytes))
    else:
        records = [Record(default_key, body)]
    check_message_sizes(records, max_message_bytes)
    return records


def check_message_sizes(records: list[Record], max_message_bytes: int) -> None:
    for index, record in enumerate(records):
        if len(record.value) > max_message_bytes:
            raise ApiError(
                413,
                MSG_SIZE_EXCEEDS_MSG_LIMIT,
                f"{MSG_SIZE_EXCEEDS} Message {index} has {len(record.value)} bytes; "
                f"the limit is {max_message_bytes}.",
            )


def request_too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        MSG_SIZE_EXCEEDS_BATCH_LIMIT,
        f"{MSG_SIZE_EXCEEDS} The request has more than {limit} bytes ({size}).",
    )


def parse_json(body: bytes, default_key: bytes | None) -> list[Record]:
    text = body.lstrip(_WHITESPACE)
    if not text[:1] or text[:1] not in b"[{":
        raise ApiError(400, INCORRECT_JSON, "Expecting an array or an object.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, INCORRECT_JSON, f"Incorrect JSON object. {exc}") from exc
    items = data if isinstance(data, list) else [data]
    records = []
    for item in items:
        if not isinstance(item, dict):
            raise ApiError(400, INCORRECT_JSON, "Expected { to start an object.")
        own_key = item.get("cambria.partition")
        key = own_key.encode() if isinstance(own_key, str) else default_key
        records.append(Record(key, orjson.dumps(item)))
    return records


def split_lines(body: bytes) -> list[bytes]:
    """Java ``readLine`` over the body: no empty message for a final line break."""
    if not body:
        return []
    lines = _LINE_BREAK.split(body)
    if lines[-1] == b"":
        lines.pop()
    return lines


def parse_cambria(body: bytes) -> list[Record]:
    records: list[Record] = []
    pos = 0
    end = len(body)
    while True:
        while pos < end and body[pos] in _WHITESPACE:
            pos += 1
        if pos == end:
            return records
        key_len, pos = _length(body, pos)
        msg_len, pos = _length(body, pos)
        need = key_len + msg_len
        if end - pos < need:
            raise bad_framing(f"End of stream while reading {need} bytes")
        key = body[pos : pos + key_len] or None
        records.append(Record(key, body[pos + key_len : pos + need]))
        pos += need


def _length(body: bytes, pos: int) -> tuple[int, int]:
    """A decimal length ended by ``.`` at ``pos`` -> (value, position after the dot)."""
    start = pos
    while pos < len(body) and 0x30 <= body[pos] <= 0x39:
        pos += 1
    if pos == start or pos >= len(body) or body[pos] != 0x2E:
        raise bad_framing("Expected . after length.")
    value = int(body[start:pos])
    if value > CAMBRIA_MAX_LENGTH:
        raise bad_framing("Expected . after length.")
    return value, pos + 1


def gunzip(body: bytes, limit: int) -> bytes:
    """Inflate a gzip body, refusing more than ``limit`` bytes out (a zip bomb is a 413)."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit:
            raise request_too_large(len(out), limit)
        if not inflater.eof:
            raise zlib.error("incomplete or truncated stream")
    except zlib.error as exc:
        raise bad_framing(f"Couldn't read compressed format: {exc}") from exc
    return out


def encode_cambria(records: list[tuple[bytes, bytes]]) -> bytes:
    """The writer's side (JC's framing, one record a line): for tests and clients."""
    return b"".join(
        str(len(k)).encode() + b"." + str(len(v)).encode() + b"." + k + v + b"\n"
        for k, v in records
    )
