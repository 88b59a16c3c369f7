"""What iot-api's operator routes know of the fleet, followed from Kafka on a daemon thread:
presence and last telemetry of every tenant's devices, and recent commands with their states
and replies (the console's :class:`FleetState`, fed with every tenant's topics).

Started by the first request that needs it, so a service used only for pub/sub never reads the
telemetry topics. Compacted topics (presence) are read from their beginning, the others from
their last records (``BACKLOG``); a topic that appears later (a new tenant's) is read from its
beginning once the periodic metadata check finds it. Older commands are read from Kafka on
demand (:mod:`api.operator.kafka`). A consumer that silently stops receiving (it fetches
nothing while the topics' high watermarks move on; librdkafka raises nothing) is found by its
:class:`StallJudge` and replaced after ``stall_s`` without progress, resuming where it was
(issue 32, as the console's tailer).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition

from api.console.fleet import FleetState
from api.operator.model import status_tenant
from api.plumbing.kafka_batch import take
from appconfig.kafka_security import client_base
from kafka_watch.consumer import consumer_stalled
from kafka_watch.retired import retire
from kafka_watch.stall import StallJudge
from registry.ids import DEFAULT_TENANT
from registry.topics import device_username

log = logging.getLogger(__name__)
# kind -> records per partition read back at start (None: all)
BACKLOG: dict[str, int | None] = {"presence": None, "telemetry": 100, "status": 5000,
                                  "replies": 2000}  # fmt: skip
_DEVICE_TOPIC = re.compile(r"iot\.(?:([a-z0-9][a-z0-9-]{0,31})\.)?(telemetry|presence)")
_RECHECK_S = 5.0


class FleetFeed:
    def __init__(
        self, bootstrap: str, status_topic: str, replies_topic: str, stall_s: float = 30.0
    ) -> None:
        self.bootstrap = bootstrap
        self.status_topic = status_topic
        self.replies_topic = replies_topic
        self.state = FleetState()
        self.lock = threading.Lock()
        self.kafka_ok = False
        self._assigned = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next: dict[tuple[str, int], int] = {}  # a new consumer resumes, never repeats
        self._started: dict[tuple[str, int], int] = {}  # where each partition was first read
        self.stall = StallJudge("operator-feed", stall_s)  # counted on /metrics
        self.on_assign: Callable[[Consumer], None] | None = None  # tests: each new consumer
        self._start_lock = threading.Lock()

    def _kind(self, topic: str) -> tuple[str, str] | None:
        """(kind, tenant) of a topic this feed reads."""
        if topic == self.status_topic:
            return "status", DEFAULT_TENANT
        if topic == self.replies_topic:
            return "replies", DEFAULT_TENANT
        m = _DEVICE_TOPIC.fullmatch(topic)
        if m is None:
            return None
        return m[2], m[1] or DEFAULT_TENANT

    async def ensure_started(self, wait_s: float = 10.0) -> None:
        """Start the thread on first use; wait (bounded) for its first assignment."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="api-fleet", daemon=True)
                self._thread.start()
        if not self._assigned.is_set():
            await asyncio.to_thread(self._assigned.wait, wait_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _assign(self, consumer: Consumer, first: bool) -> set[str]:
        meta = consumer.list_topics(timeout=5)
        assignment, names = [], set()
        for topic, t in meta.topics.items():
            if self._kind(topic) is None or t.error is not None:
                continue
            names.add(topic)
            back = BACKLOG[self._kind(topic)[0]]  # type: ignore[index]
            for p in t.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                start = low if back is None or not first else max(low, high - back)
                start = self._started.setdefault((topic, p), start)  # a renewal: the same
                start = max(self._next.get((topic, p), start), low)
                assignment.append(TopicPartition(topic, p, start))
        consumer.assign(assignment)
        return names

    def _stalled(self, consumer: Consumer) -> bool:
        """Whether ``consumer`` stalled (then counted and logged: the caller replaces it)."""
        with self.lock:
            handed = self._started | self._next
        return consumer_stalled(consumer, self.stall, handed, "operator feed: its")

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            stalled = False
            consumer = Consumer(
                {**client_base(self.bootstrap),
                 "group.id": f"iot-api-fleet-{uuid.uuid4().hex}",  # never joined: assign only
                 "enable.auto.commit": False, "fetch.wait.max.ms": 100}
            )  # fmt: skip
            try:
                known = self._assign(consumer, first)
                first = False
                self.stall.assigned(time.monotonic())  # nothing held against a new one
                if self.on_assign is not None:
                    self.on_assign(consumer)
                self.kafka_ok = True
                self._assigned.set()
                checked = time.monotonic()
                while not self._stop.is_set():
                    self._apply(take(consumer, 1000, 0.2))
                    if time.monotonic() - checked > _RECHECK_S:
                        checked = time.monotonic()
                        found = {
                            t for t in consumer.list_topics(timeout=5).topics
                            if self._kind(t) is not None
                        }  # fmt: skip
                        if found - known:
                            break  # a new tenant's topic: assign again (positions are kept)
                    if self.stall.due(time.monotonic()) and (stalled := self._stalled(consumer)):
                        break  # a new consumer resumes at self._next
            except KafkaException as exc:
                self.kafka_ok = False
                log.warning("operator feed: reading Kafka failed (%s); retrying", exc)
                self._stop.wait(2)
            finally:
                if stalled:  # freed off this thread: its broker threads may take long to end
                    retire(consumer)
                else:
                    consumer.close()

    def _apply(self, msgs: list[Any]) -> None:
        with self.lock:
            for msg in msgs:
                if msg.error() is not None:
                    continue
                topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset()
                self._next[(topic, partition)] = (offset or 0) + 1
                kind, tenant = self._kind(topic) or ("", DEFAULT_TENANT)
                self.state.apply(
                    kind, partition=partition, offset=offset or 0, key=msg.key(),
                    value=msg.value(), headers=msg.headers(), timestamp=msg.timestamp()[1],
                    tenant=tenant,  # from the topic: iot.{t}.telemetry is tenant t's
                )  # fmt: skip
                if kind == "status":
                    self._remember_tenant(msg.value())

    def _remember_tenant(self, value: bytes | None) -> None:
        try:
            doc = orjson.loads(value or b"")
        except orjson.JSONDecodeError:
            return
        if not isinstance(doc, dict):
            return
        entry = self.state.commands.get(str(doc.get("command_id")))
        tenant = status_tenant(doc)
        if entry is not None and tenant is not None:
            entry["tenant"] = tenant

    # --- reads (any thread) ----------------------------------------------------------------

    def seen(self, tenant: str, device_id: str) -> dict[str, Any]:
        with self.lock:
            found = self.state.devices.get(device_username(tenant, device_id))
            if found is None:
                return {"online": None, "last_seen": None, "presence_at": None}
            return {
                "online": found.online,
                "last_seen": max(found.last_seen, found.presence_at) or None,
                "presence_at": found.presence_at or None,
            }

    def command(self, command_id: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.state.commands.get(command_id)
            return orjson.loads(orjson.dumps(found)) if found is not None else None

    def commands(self) -> list[dict[str, Any]]:
        with self.lock:
            return orjson.loads(orjson.dumps(list(self.state.commands.values())))
