"""Follows the fleet's topics into a :class:`FleetState` on a daemon thread.

Starts a little back in history so pages have something at once: compacted topics (presence,
command status) and the audit trail from their beginning, the others from their last records.
Kafka down is tolerated: the thread retries and ``kafka_ok`` says so. A consumer that silently
stops receiving (librdkafka raises nothing: it fetches nothing while the topics' high
watermarks move on) is found by its :class:`StallJudge` (checked every ``stall_s / 3`` s, at
most 10 s) and replaced after ``stall_s`` without progress, resuming where it was (issue 32).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from api.console.fleet import FleetState
from api.plumbing.kafka_batch import take
from appconfig.kafka_security import client_base
from bridge.topics import tenant_kafka_topic
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire
from kafka_watch.stall import StallJudge
from registry import ids

log = logging.getLogger(__name__)

# kind -> how many records per partition to read back at start (None: all)
BACKLOG: Mapping[str, int | None] = {
    "telemetry": 200,
    "events": 50,
    "presence": None,
    "dlq": 2000,
    "status": 5000,
    "replies": 2000,
    "audit": None,
}


# kinds whose records tenants have copies of (iot.{t}.telemetry ..., iot.{t}.dlq)
TENANT_KINDS = ("telemetry", "events", "presence", "dlq")


def tenant_copies(topics: Mapping[str, str], names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Of the Kafka topic ``names``, each tenant's copy of a watched topic -> (its kind, the
    tenant)."""
    found: dict[str, tuple[str, str]] = {}
    for kind in TENANT_KINDS:
        base = topics.get(kind)
        if base is None:
            continue
        head, dot, tail = base.partition(".")
        for name in names:
            if not (dot and name.startswith(head + ".") and name.endswith("." + tail)):
                continue
            tenant = name[len(head) + 1 : len(name) - len(tail) - 1]
            if ids.TENANT_RE.fullmatch(tenant) and tenant_kafka_topic(base, tenant) == name:
                found[name] = (kind, tenant)
    return found


class Tailer:
    def __init__(
        self,
        bootstrap: str,
        topics: Mapping[str, str],
        state: FleetState,
        stall_s: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = dict(topics)  # kind -> topic name
        self.state = state
        self.lock = threading.Lock()
        self.kafka_ok = False
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next: dict[tuple[str, int], int] = {}  # a re-assignment resumes, never repeats
        self._started: dict[tuple[str, int], int] = {}  # where each partition was first read
        self.stall = StallJudge("console-tailer", stall_s)  # counted on /metrics
        self.on_assign: Callable[[Consumer], None] | None = None  # tests: each new consumer
        self.tenant_topics = 0  # tenants' copies assigned now
        self._tenant_of: dict[str, str] = {}  # a tenant's topic -> the tenant

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="console-tailer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _assign(self, consumer: Consumer) -> dict[str, str]:
        meta = consumer.list_topics(timeout=5)
        kinds: dict[str, str] = {}
        assignment = []
        watched = {topic: kind for kind, topic in self.topics.items()}
        copies = tenant_copies(self.topics, meta.topics)
        watched |= {topic: kind for topic, (kind, _) in copies.items()}
        self._tenant_of = {topic: tenant for topic, (_, tenant) in copies.items()}
        self.tenant_topics = len(watched) - len(self.topics)
        for topic, kind in watched.items():
            t = meta.topics.get(topic)
            if t is None or t.error is not None:
                continue
            kinds[topic] = kind
            back = BACKLOG.get(kind)
            whole = True
            for p in t.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                start = low if back is None else max(low, high - back)
                start = self._started.setdefault((topic, p), start)  # a renewal: the same
                if (topic, p) not in self._next:  # first read: from its start or not
                    whole = whole and start <= low
                start = max(self._next.get((topic, p), start), low)
                assignment.append(TopicPartition(topic, p, start))
            with self.lock:  # a resumed topic keeps what eviction already said
                self.state.complete[kind] = whole and self.state.complete.get(kind, True)
        consumer.assign(assignment)
        return kinds

    def _new_tenant_topics(self, consumer: Consumer) -> bool:
        """A tenant's topic made since the last assignment (a new tenant's first records)."""
        names = consumer.list_topics(timeout=5).topics
        return len(tenant_copies(self.topics, names)) != self.tenant_topics

    def _stalled(self, consumer: Consumer) -> bool:
        """Whether ``consumer`` stalled (then counted and logged: the caller replaces it)."""
        handed = self._started | self._next  # this thread alone writes them
        return consumer_stalled(consumer, self.stall, handed, "console: the tailer's")

    def _run(self) -> None:
        while not self._stop.is_set():
            stalled = False
            consumer = Consumer(
                {**client_base(self.bootstrap),
                 "group.id": f"iot-console-probe-{uuid.uuid4().hex}",
                 "enable.auto.commit": False, "fetch.wait.max.ms": 100}
            )  # fmt: skip
            try:
                kinds = self._assign(consumer)
                self.stall.assigned(time.monotonic())  # nothing held against a new one
                if self.on_assign is not None:
                    self.on_assign(consumer)
                missing = set(self.topics.values()) - set(kinds)
                checked = time.monotonic()
                self.kafka_ok, self.error = True, ""
                while not self._stop.is_set():
                    msgs = take(consumer, 1000, 0.5)  # a record is shown once fetched
                    with self.lock:
                        for msg in msgs:
                            if msg.error() is not None:
                                continue
                            topic = msg.topic() or ""
                            self._next[(topic, msg.partition() or 0)] = (msg.offset() or 0) + 1
                            self.state.apply(
                                kinds[topic], partition=msg.partition() or 0,
                                offset=msg.offset() or 0, key=msg.key(), value=msg.value(),
                                headers=msg.headers(), timestamp=msg.timestamp()[1],
                                tenant=self._tenant_of.get(topic),
                            )  # fmt: skip
                    if time.monotonic() - checked > 10:
                        if missing or self._new_tenant_topics(consumer):
                            break  # a topic created since: assign again (state is kept)
                        checked = time.monotonic()
                    if self.stall.due(time.monotonic()) and (stalled := self._stalled(consumer)):
                        break  # a new consumer resumes at self._next
            except (KafkaException, KeyError) as exc:
                self.kafka_ok, self.error = False, str(exc)
                log.warning("console: reading Kafka failed (%s); retrying", exc)
                self._stop.wait(2)
            finally:
                if stalled:  # freed off this thread: its broker threads may take long to end
                    retire(consumer)
                else:
                    consumer.close()
