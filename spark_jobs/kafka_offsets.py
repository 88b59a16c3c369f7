"""What Kafka holds: the end offset of every partition of some topics (for the stall check)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from appconfig.kafka_security import client_base
from spark_jobs.query_health import Offsets

log = logging.getLogger(__name__)


def end_offsets(
    bootstrap: str, topics: Iterable[str], timeout_s: float = 5.0, optional: Iterable[str] = ()
) -> Offsets | None:
    """topic -> partition -> high watermark, or None while Kafka cannot be reached.

    ``optional`` topics (tenants' topics a checkpoint names) are left out when they are gone."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            **client_base(bootstrap),
            "group.id": f"iot-analytics-health-{uuid.uuid4().hex[:8]}",  # never joins: no commit
            "enable.auto.commit": False,
            "log_level": 0,  # an unreachable Kafka is reported as None, not as log noise
        }
    )
    try:
        found: Offsets = {}
        maybe = set(optional) - set(topics)
        for topic in [*topics, *sorted(maybe)]:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if meta is None or meta.error is not None:
                if topic in maybe:
                    continue
                return None
            parts: dict[str, int] = {}
            for partition in meta.partitions:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout_s
                )
                parts[str(partition)] = int(high)
            found[topic] = parts
        return found
    except KafkaException as exc:
        log.debug("Kafka end offsets unavailable: %s", exc)
        return None
    finally:
        consumer.close()
