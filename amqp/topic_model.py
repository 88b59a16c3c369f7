"""MR topics as AMQP addresses (pure): ``topic/{name}`` and ``topic/{name}::{group}``.

A receiver link on ``topic/{name}`` is a member of a Kafka consumer group: the ``::{group}``
suffix names it (EnMasse's subscription syntax), else the link name does
(:func:`topic_group_id`); members of one group share the topic, each group gets every record.
A sender link on ``topic/{name}`` publishes to it as ``POST /events/{name}``. Who may do either
is iot-api's rule for the topic (``api.plumbing.access.may_access``: read to receive, write to
send).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from amqp.model import Cond, Refusal
from appconfig.settings import KAFKA_TOPIC_RE

TOPIC_PREFIX: Final = "topic/"
GROUP_SEPARATOR: Final = "::"
_GROUP_RE: Final = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@dataclass(frozen=True, slots=True)
class TopicAddress:
    topic: str
    group: str | None = None


def parse_topic_address(address: str | None) -> TopicAddress | Refusal | None:
    """``topic/{name}[::{group}]``; a refusal for a malformed one; None if no topic address."""
    if not address or not address.startswith(TOPIC_PREFIX):
        return None
    name, sep, group = address[len(TOPIC_PREFIX) :].partition(GROUP_SEPARATOR)
    if name in (".", "..") or not KAFKA_TOPIC_RE.fullmatch(name):
        return Refusal(Cond.NOT_FOUND, f"no topic {name[:100]!r} (1-249 of [a-zA-Z0-9._-])")
    if sep and not _GROUP_RE.fullmatch(group):
        return Refusal(Cond.NOT_FOUND, "a group after '::' is 1-128 of [a-zA-Z0-9._-]")
    return TopicAddress(name, group if sep else None)


def topic_group_id(address: TopicAddress, link_name: str) -> str:
    """The Kafka consumer group of a receiver link on the topic."""
    return f"iot-amqp.topic.{address.topic}.{address.group or link_name}"
