"""Waiting for new Kafka topics to be usable (adapter over an AdminClient's metadata).

CreateTopics returns once the controller holds a topic; a broker learns of it a moment later,
and a client asking in between gets "unknown topic" or "leader not available". Whoever creates
a topic and then uses it at once (the registry, the launcher) waits here first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

_POLL_S = 0.05


def unready_topics(metadata: Any, names: Iterable[str]) -> list[str]:
    """The topics of `names` that a metadata answer does not yet show with a leader on every
    partition (a missing topic, a topic error, a partition without a leader or with an error)."""
    waiting = []
    for name in names:
        topic = metadata.topics.get(name)
        if (
            topic is None
            or topic.error is not None
            or not topic.partitions
            or any(p.leader < 0 or p.error is not None for p in topic.partitions.values())
        ):
            waiting.append(name)
    return waiting


def await_leaders(admin: AdminClient, names: Iterable[str], timeout: float) -> list[str]:
    """Wait until the metadata shows every topic of `names` led on every partition; returns
    those still not led when `timeout` ran out (empty: all usable)."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        try:
            waiting = unready_topics(admin.list_topics(timeout=timeout), waiting)
        except KafkaException as exc:
            log.debug("metadata not available yet: %s", exc)
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    return waiting
