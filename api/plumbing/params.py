"""Request parameters and topic shapes (contract §3-4): pure checks, MR's texts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from api.errors import (
    CONSUME_MSG_ERROR,
    INCORRECT_JSON,
    INCORRECT_JSON_TEXT,
    ApiError,
)

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def check_topic_name(topic: str) -> str:
    """Kafka's rule (DEV: MR itself checks nothing): 400 for a name Kafka would refuse."""
    if not _TOPIC_RE.match(topic) or topic in (".", ".."):
        raise ApiError(
            400, INCORRECT_JSON, f"Invalid topic name [{topic}]: use 1-249 of [a-zA-Z0-9._-]."
        )
    return topic


def kafka_group_id(group: str, topic: str) -> str:
    """One Kafka group per (MR group, topic), as MR names it."""
    return f"{group}--{topic}"


@dataclass(frozen=True, slots=True)
class PollParams:
    timeout_ms: int
    limit: int


def poll_params(
    timeout: str | None, limit: str | None, *, default_timeout_ms: int, max_timeout_ms: int,
    default_limit: int,
) -> PollParams:  # fmt: skip
    """MR's rules: non-numeric -> default, 0 or absent limit -> default; DEV: negative -> 400,
    timeout capped at ``max_timeout_ms``."""
    timeout_ms = _int_or(timeout, default_timeout_ms)
    count = _int_or(limit, 0)
    if timeout_ms < 0 or count < 0:
        raise ApiError(400, CONSUME_MSG_ERROR, "timeout and limit must not be negative.")
    return PollParams(min(timeout_ms, max_timeout_ms), count or default_limit)


def _int_or(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class TopicRequest:
    name: str
    description: str
    partitions: int  # 0 = the service's default
    replicas: int  # 0 = the broker's default
    transactions: bool


def parse_create_topic(body: bytes) -> TopicRequest:
    """``POST /topics/create``: numbers as ints or strings, booleans as bools or strings."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, INCORRECT_JSON, INCORRECT_JSON_TEXT) from exc
    if not isinstance(data, dict) or not isinstance(data.get("topicName"), str):
        raise ApiError(400, INCORRECT_JSON, INCORRECT_JSON_TEXT)
    partitions = _number(data.get("partitionCount"))
    replicas = _number(data.get("replicationCount"))
    if partitions is not None and partitions < 1:
        raise ApiError(400, INCORRECT_JSON, "The partition count must be at least 1.")
    if replicas is not None and not 1 <= replicas <= 3:
        raise ApiError(400, INCORRECT_JSON, "The replica count must be between 1 and 3.")
    return TopicRequest(
        name=check_topic_name(data["topicName"]),
        description=str(data.get("topicDescription") or ""),
        partitions=partitions or 0,
        replicas=replicas or 0,
        transactions=_boolean(data.get("transactionEnabled")),
    )


def _number(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ApiError(400, INCORRECT_JSON, INCORRECT_JSON_TEXT)
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ApiError(400, INCORRECT_JSON, INCORRECT_JSON_TEXT) from exc


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


def topic_details(name: str, description: str = "", owner: str = "") -> dict[str, Any]:
    """``GET /topics/{topic}`` and the create answer (TopicBean): open ACLs."""
    acl = {"enabled": True, "users": []}
    return {
        "name": name,
        "description": description,
        "owner": owner,
        "readerAcl": acl,
        "writerAcl": dict(acl),
    }


def topic_summary(name: str, owner: str = "", txenabled: bool = False) -> dict[str, Any]:
    """One element of ``GET /topics/listAll``."""
    return {"topicName": name, "owner": owner, "txenabled": txenabled}
