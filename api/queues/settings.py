"""Queues' own settings, durable in Kafka: a compacted topic (one partition) keyed by queue,
read from its beginning by a thread of every instance and followed, so a restarted or second
`iot-api` applies what any instance set. Writes go through the service's producer (acks=all),
and the writer applies its own change at once.

The reader is a long-lived consumer: one that librdkafka wedges fetches nothing while settings
arrive (issue 32). Its :class:`~kafka_watch.stall.StallJudge` (``stall_s``) finds it, and a new
consumer resumes at the next offset to apply (nothing applied twice or skipped); counted as
``queue-settings`` on /metrics."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from api.plumbing.kafka_batch import take
from api.queues import model as qm
from appconfig.kafka_security import client_base
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire
from kafka_watch.stall import StallJudge

log = logging.getLogger(__name__)


def ensure_settings_topic(bootstrap: str, topic: str, timeout_s: float = 3.0) -> None:
    admin = AdminClient({**client_base(bootstrap), "client.id": "iot-api-queues"})
    brokers = len(admin.list_topics(timeout=timeout_s).brokers) or 1
    new = NewTopic(
        topic, num_partitions=1, replication_factor=min(3, brokers),
        config={"cleanup.policy": "compact"},
    )  # fmt: skip
    try:
        admin.create_topics([new], operation_timeout=10)[topic].result(15)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class QueueSettingsStore:
    def __init__(self, bootstrap: str, topic: str, stall_s: float = 30.0) -> None:
        self.topic = topic
        self.stall = StallJudge("queue-settings", stall_s)  # counted on /metrics
        self.on_consumer: Callable[[Consumer], None] | None = None  # tests: each new one
        self._next: int | None = None  # the next offset to apply (None: from the beginning)
        self._bootstrap = bootstrap
        self._settings: dict[str, qm.QueueSettings] = {}
        self._stop = threading.Event()
        self.ready = threading.Event()  # read up to the end once: the settings are known
        self._thread = threading.Thread(target=self._run, name="queue-settings", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def get(self, queue: str) -> qm.QueueSettings | None:
        return self._settings.get(queue)

    def applied(self, queue: str, settings: qm.QueueSettings) -> None:
        """This instance wrote it (Kafka acknowledged): in force here at once."""
        self._settings[queue] = settings

    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            while not self._stop.is_set():
                try:
                    ensure_settings_topic(self._bootstrap, self.topic)
                    break
                except KafkaException as exc:
                    log.warning("queue settings topic %s: %s", self.topic, exc.args[0])
                    self._stop.wait(2.0)
            if self._stop.is_set():
                return
            consumer = self._new_consumer()
            end = self._end(consumer)
            while not self._stop.is_set():
                for msg in take(consumer, 500, 0.2):
                    if msg.error() is not None:
                        continue
                    self._apply(msg.key(), msg.value())
                    self._next = (msg.offset() or 0) + 1
                    if end is not None and self._next >= end:
                        end = None
                if self.stall.due(time.monotonic()) and self._stalled(consumer):
                    old, consumer = consumer, self._new_consumer()
                    retire(old)  # freed off this thread
                    del old
                if end is not None and self._caught_up(consumer, end):
                    end = None
                if end is None and not self.ready.is_set():
                    log.info("queue settings: %d queues' read", len(self._settings))
                    self.ready.set()
        except Exception:
            log.exception("queue settings: the reader stopped")
        finally:
            if consumer is not None:
                with contextlib.suppress(KafkaException, RuntimeError):
                    consumer.close()

    def _new_consumer(self) -> Consumer:
        """A reader assigned at the next offset to apply."""
        consumer = Consumer(
            {
                **client_base(self._bootstrap),
                "group.id": f"iot-api-settings-{uuid.uuid4().hex}",  # never commits
                "enable.auto.commit": False,
                "client.id": "iot-api-queue-settings",
            }
        )
        start = OFFSET_BEGINNING if self._next is None else self._next
        consumer.assign([TopicPartition(self.topic, 0, start)])
        self.stall.assigned(time.monotonic())
        if self.on_consumer is not None:
            self.on_consumer(consumer)
        return consumer

    def _stalled(self, consumer: Consumer) -> bool:
        """Whether the reader stalled (then logged and counted: the caller replaces it)."""
        handed = {(self.topic, 0): self._next or 0}  # nothing applied yet: from the start
        try:
            return consumer_stalled(consumer, self.stall, handed, "queue settings: its")
        except KafkaException as exc:  # Kafka not answering: nothing to judge
            log.debug("queue settings: stall check failed: %s", exc)
            return False

    def _end(self, consumer: Consumer) -> int | None:
        """The end when the reader started (None: empty, nothing to wait for)."""
        while not self._stop.is_set():
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=5)
            except KafkaException as exc:  # a topic just made: no leader yet
                log.warning("queue settings: %s", exc.args[0])
                self._stop.wait(0.5)
                continue
            return high if high > low else None
        return None

    def _caught_up(self, consumer: Consumer, end: int) -> bool:
        with contextlib.suppress(KafkaException):
            (tp,) = consumer.position([TopicPartition(self.topic, 0)])
            return tp.offset >= end
        return False

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if not key:
            return
        queue = key.decode("utf-8", "replace")
        found = qm.decode_settings(value)
        if found is None:
            self._settings.pop(queue, None)
        else:
            self._settings[queue] = found
