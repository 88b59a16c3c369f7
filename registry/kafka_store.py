"""The registry's durable store: a compacted Kafka topic, plus the audit topic (adapter).

- ``iot.registry``: key = entity key, value = entity JSON, tombstone on delete;
  ``cleanup.policy=compact`` keeps the latest value per entity forever. State is rebuilt at
  start by reading the topic to its end (read_committed).
- ``iot.registry.audit``: one record per change; kept forever (``retention.ms=-1``).

Single writer, enforced by Kafka: every writer uses the same ``transactional.id``.
``init_transactions`` fences any older writer (its next commit fails with a fenced error)
and completes that writer's open transaction, so a writer that then reads to the end sees
every committed change. Each change (entity records + audit records) is one transaction:
both topics change together or not at all.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from registry.audit import AuditRecord
from registry.errors import RegistryError
from registry.topic_ready import await_leaders

log = logging.getLogger(__name__)

REGISTRY_TOPIC = "iot.registry"
AUDIT_TOPIC = "iot.registry.audit"
TRANSACTIONAL_ID = "iot-registry"
READABLE_TIMEOUT_S = 10.0  # a commit waits this long for its change to be readable


class StoreError(RegistryError):
    """Kafka refused or could not be reached."""


class WriterFencedError(StoreError):
    """Another registry writer started after this one: re-read and retry."""


Record = tuple[bytes, bytes | None]

_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


class KafkaStore:
    def __init__(
        self,
        bootstrap: str,
        topic: str = REGISTRY_TOPIC,
        audit_topic: str = AUDIT_TOPIC,
        transactional_id: str = TRANSACTIONAL_ID,
        timeout: float = 30.0,
        *,
        security: Mapping[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        # librdkafka's security.protocol/sasl.*/ssl.* settings of a secured cluster (issue 33)
        self.security = dict(security or {})
        self.client_base: dict[str, str] = {"bootstrap.servers": bootstrap, **self.security}
        self.topic = topic
        self.audit_topic = audit_topic
        self.transactional_id = transactional_id
        self.timeout = timeout
        self._producer: Producer | None = None
        self._reader: Consumer | None = None  # the writer's check that its change is readable

    def ensure_topics(self) -> list[str]:
        """Create both topics if missing (one partition each: total order, tiny volume), with
        3 replicas and min.insync.replicas 2 on a cluster of 3 or more brokers."""
        admin = AdminClient(dict(self.client_base))
        try:
            brokers = len(admin.list_topics(timeout=self.timeout).brokers)
        except KafkaException as exc:
            raise StoreError(f"Kafka at {self.bootstrap} did not answer: {exc.args[0]}") from exc
        replicas = max(1, min(3, brokers))
        min_isr = {"min.insync.replicas": "2" if replicas >= 3 else "1"}
        specs = [
            NewTopic(self.topic, 1, replicas, config={"cleanup.policy": "compact", **min_isr}),
            NewTopic(self.audit_topic, 1, replicas, config={"retention.ms": "-1", **min_isr}),
        ]
        created = []
        for name, future in admin.create_topics(specs, operation_timeout=self.timeout).items():
            try:
                future.result(timeout=self.timeout)
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise StoreError(f"could not create topic {name}: {exc.args[0]}") from exc
        if waiting := await_leaders(admin, created, self.timeout):
            raise StoreError(f"topics created but not led after {self.timeout:.0f} s: {waiting}")
        return created

    def read_all(self, topic: str | None = None) -> list[Record]:
        """Every committed record of ``topic`` (default: the registry topic), in order."""
        return self.read_since(None, topic)[0]

    def read_since(
        self, position: dict[int, int] | None, topic: str | None = None
    ) -> tuple[list[Record], dict[int, int]]:
        """Committed records after ``position`` (partition -> next offset; None = from the
        start) up to the end, and the new position (for a long-running reader's refresh)."""
        name = topic or self.topic
        start = position or {}
        consumer = Consumer(
            {
                **self.client_base,
                "group.id": f"iot-registry-load-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
        try:
            meta = consumer.list_topics(name, timeout=self.timeout)
            info = meta.topics.get(name)
            if info is None or info.error is not None:
                raise StoreError(f"topic {name} not found: run `iot-devices init`")
            partitions = sorted(info.partitions)
            consumer.assign([TopicPartition(name, p, start.get(p, 0)) for p in partitions])
            return self._drain(consumer, partitions, dict(start))
        finally:
            consumer.close()

    def _drain(
        self, consumer: Consumer, partitions: list[int], position: dict[int, int]
    ) -> tuple[list[Record], dict[int, int]]:
        records: list[Record] = []
        at_end: set[int] = set()
        idle = 0.0
        while len(at_end) < len(partitions):
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 0.5
                if idle > self.timeout:
                    raise StoreError(f"reading {self.topic}: no end of partition reached")
                continue
            idle = 0.0
            partition, offset = msg.partition() or 0, msg.offset() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                    position[partition] = offset  # the end, past any transaction markers
                    continue
                raise StoreError(f"reading the registry: {err}")
            records.append((msg.key() or b"", msg.value()))
            position[partition] = offset + 1
        return records, position

    def open_writer(self) -> None:
        """Become the one writer (fencing any other), before reading state to write on.

        A coordinator that is moving (a cluster just started, its transaction-state topic
        being created or its leader changing after a node died) refuses with NOT_COORDINATOR
        and the like: try again with a new producer until the timeout.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            producer = Producer(
                {
                    **self.client_base,
                    "transactional.id": self.transactional_id,
                    "enable.idempotence": True,
                    "acks": "all",
                    "transaction.timeout.ms": 60000,
                }
            )
            try:
                producer.init_transactions(max(1.0, deadline - time.monotonic()))
            except KafkaException as exc:
                err = exc.args[0]
                transient = err.retriable() or err.code() in _COORDINATOR_MOVING
                if transient and time.monotonic() < deadline:
                    log.info("registry writer: %s; trying again", err)
                    time.sleep(0.5)
                    continue
                raise StoreError(f"could not become the registry writer: {err}") from exc
            self._producer = producer
            return

    def commit(self, records: Sequence[Record], audits: Iterable[AuditRecord]) -> None:
        """Write entity records and their audit records in one transaction, and return once
        a read_committed reader can read them (see :meth:`_await_readable`)."""
        producer = self._producer
        if producer is None:
            raise StoreError("not the writer: call open_writer() first")
        written: dict[int, int] = {}  # partition -> offset of the last entity record

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                partition = msg.partition() or 0
                written[partition] = max(written.get(partition, -1), msg.offset() or 0)

        try:
            producer.begin_transaction()
            for key, value in records:
                producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
            for audit in audits:
                key, value = audit.encode()
                producer.produce(self.audit_topic, key=key, value=value)
            producer.commit_transaction(self.timeout)
            if records and not written:
                producer.flush(self.timeout)  # serves the delivery reports
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                self._producer = None
                raise WriterFencedError(
                    "another registry writer took over; nothing was written, retry"
                ) from exc
            if err.fatal():
                self._producer = None
                raise StoreError(f"registry writer failed, reopen it: {err}") from exc
            if err.txn_requires_abort():
                producer.abort_transaction(self.timeout)
            raise StoreError(f"registry write failed, nothing written: {err}") from exc
        self._await_readable(written)

    def _await_readable(self, written: dict[int, int]) -> None:
        """Wait until the registry topic's last stable offset is past ``written``.

        Kafka answers a transaction's commit once the commit is decided in its transaction
        log; the markers that let read_committed readers see the records are written to the
        partitions just after. Every checker reads up to the last stable offset (a read
        barrier, registry.follower): returning before the markers are in would let the next
        request miss the change (measured: a device added and refused by iot-api's next
        request, 1 run in 5). Bounded by ``READABLE_TIMEOUT_S``."""
        if not written:
            return
        if self._reader is None:
            self._reader = Consumer(
                {
                    **self.client_base,
                    "group.id": f"iot-registry-writer-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        deadline = time.monotonic() + READABLE_TIMEOUT_S
        for partition, offset in written.items():
            while True:
                try:
                    _low, end = self._reader.get_watermark_offsets(
                        TopicPartition(self.topic, partition),
                        timeout=max(0.1, deadline - time.monotonic()),
                        cached=False,
                    )
                except KafkaException:
                    end = -1
                if end > offset:
                    break
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"the change is committed to {self.topic}, but Kafka did not make it "
                        f"readable within {READABLE_TIMEOUT_S:.0f} s: iot-api and the console "
                        "may not act on it yet"
                    )
                time.sleep(0.002)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
