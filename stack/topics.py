"""The design's Kafka topics, and creating them idempotently."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from registry.topic_ready import await_leaders
from stack.errors import StackError
from stack.kafka_layout import Replication

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    compacted: bool = False
    config: dict[str, str] = field(default_factory=dict)

    def topic_config(self) -> dict[str, str]:
        cfg = dict(self.config)
        if self.compacted:
            cfg.setdefault("cleanup.policy", "compact")
        return cfg


# The contract in shared/docs/design.md ("Kafka topics").
DESIGN_TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("iot.telemetry"),
    TopicSpec("iot.events"),
    TopicSpec("iot.dlq"),
    TopicSpec("iot.commands"),
    TopicSpec("iot.command-status", compacted=True),
    TopicSpec("iot.command-replies"),
    TopicSpec("iot.commands.dlq"),
    TopicSpec("iot.presence", compacted=True),
)


# a request lost with its connection (librdkafka drops the bootstrap broker's handle once the
# cluster's own names are known: "broker handle destroyed" on a 3-node start): sent again
_TRANSIENT = frozenset({KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT})
_ATTEMPTS = 3


def ensure_topics(
    bootstrap: str,
    specs: tuple[TopicSpec, ...] | list[TopicSpec] = DESIGN_TOPICS,
    partitions: int = 12,
    timeout: float = 30.0,
    brokers: int | None = None,
    *,
    security: Mapping[str, str] | None = None,
) -> list[str]:
    """Create the topics that do not exist yet; returns the names created.

    Replicated as the cluster allows: 3 replicas and min.insync.replicas 2 on 3+ brokers (set
    on the topic, so an external cluster's broker defaults do not matter), 1 on one broker.
    `brokers`: the cluster's size when known (a node that just started may not be listed yet).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    if brokers is None:  # an external cluster: as many as it reports now
        try:
            brokers = len(admin.list_topics(timeout=timeout).brokers)
        except KafkaException as exc:
            raise StackError(f"Kafka at {bootstrap} did not answer: {exc.args[0]}") from exc
    rep = Replication.for_brokers(brokers)
    new = [
        NewTopic(
            s.name,
            num_partitions=partitions,
            replication_factor=rep.factor,
            config={"min.insync.replicas": str(rep.min_insync), **s.topic_config()},
        )
        for s in specs
    ]
    created: list[str] = []
    for attempt in range(_ATTEMPTS):
        again = []
        for name, future in admin.create_topics(new, operation_timeout=timeout).items():
            try:
                future.result(timeout=timeout)
                created.append(name)
            except KafkaException as exc:
                err = exc.args[0]
                code = err.code() if isinstance(err, KafkaError) else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    if attempt:  # made by the lost request: it needs its leaders too
                        created.append(name)
                    continue
                if code in _TRANSIENT and attempt + 1 < _ATTEMPTS:
                    again.append(name)
                    continue
                raise StackError(f"could not create topic {name}: {err}") from exc
        if not again:
            break
        log.info("creating topics %s again (the request's broker went away)", ", ".join(again))
        new = [t for t in new if t.topic in again]
        time.sleep(1.0)
    if created:
        log.info("created topics %s", ", ".join(created))
        if waiting := await_leaders(admin, created, timeout):
            raise StackError(f"topics created but not led after {timeout:.0f} s: {waiting}")
    return created
