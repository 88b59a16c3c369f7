"""A long-running reader's view of the registry topic, with a read barrier (adapter).

Every part that checks credentials against the registry (iot-api's accounts, api keys and HTTP
devices, the console's log-in and sessions) keeps the registry in memory. A copy that is only
re-read every few seconds accepts a disabled account, and refuses a new one, for those seconds
after the command that changed it returned (issue 37). ``catch_up`` closes that window: it asks
Kafka for the registry topic's end (the last stable offset: a read_committed consumer's
ListOffsets) and reads up to it before the caller decides. A change whose transaction was
committed before ``catch_up`` began, i.e. any command that had returned, is therefore in the
state the caller checks. The cost is one ListOffsets round trip to the partition leader when
nothing changed (measured in docs/security.md, "Read your writes"); callers share one barrier
between concurrent requests (api.plumbing.auth).

The consumer is kept open between calls (one TCP connection, its fetch position kept), unlike
:meth:`registry.kafka_store.KafkaStore.read_since`, which opens a consumer per call. The client
that asks for the end is made anew after a query that failed: it fetches nothing, so nothing
else makes librdkafka look for a new partition leader, and its ListOffsets kept going to the
dead leader of a 3-node cluster until that node came back (bench/results/chaos.md, "3-node
Kafka": every iot-api login refused for the 42 s the node was away, not the seconds the
cluster took to elect another leader).

The fetching consumer itself can wedge (issue 32): librdkafka raises nothing, it just delivers
nothing, and every strict ``catch_up`` times out (every log-in refused) while the topic's end
moves on. Each ``catch_up`` shows its :class:`~kafka_watch.stall.StallJudge` the position and
the end it just asked (no further request): a partition behind its end at a position that has
not moved for ``stall_s`` makes the consumer stalled, and it is logged, counted (``stall``:
iot-api's ``iot_api_kafka_client_renewals_total{client="registry-follower"}``) and replaced by a
new one assigned at the same positions (nothing read twice, nothing skipped); the old one is
freed off the caller's thread (:func:`kafka_watch.retired.retire`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kafka_watch.consumer import stalled_log
from kafka_watch.retired import retire
from kafka_watch.stall import StallJudge
from registry.kafka_store import Record, StoreError

DEFAULT_TIMEOUT_S = 3.0
QUIET_S = 10.0  # not strict: after Kafka did not answer, how long to not ask it again
STRICT_QUIET_S = 2.0  # strict: how long to refuse at once (not after a timeout) meanwhile


class RegistryFollower:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        timeout: float = DEFAULT_TIMEOUT_S,
        security: Mapping[str, str] | None = None,
        *,
        stall_s: float = 30.0,
        name: str = "registry-follower",
    ) -> None:
        self.bootstrap = bootstrap
        self.client_base: dict[str, str] = {"bootstrap.servers": bootstrap, **(security or {})}
        self.topic = topic
        self.timeout = timeout
        self._consumer: Consumer | None = None
        self._probe: Consumer | None = None
        self._position: dict[int, int] = {}
        self._lock = threading.Lock()  # a Consumer is not safe to share between threads
        self._failed_at = -1e9  # when Kafka last did not answer the end's query
        self.stall = StallJudge(name, stall_s)  # counted on its service's /metrics
        self.on_consumer: Callable[[Consumer], None] | None = None  # tests: each new one

    def start(self, position: dict[int, int]) -> None:
        """Follow the topic from ``position`` (partition -> next offset, as a full read left
        it: :meth:`KafkaStore.read_since`)."""
        self._position = dict(position)
        self._consumer = self._new_consumer()
        # The end is asked on a connection of its own: on the fetching consumer's, the answer
        # queues behind the broker's held fetch (fetch.wait.max.ms): measured ~100 ms a check.
        self._probe = self._new_probe()

    def _new_consumer(self) -> Consumer:
        """A fetching consumer assigned at the current positions."""
        consumer = Consumer(
            {
                **self.client_base,
                "group.id": f"iot-registry-follow-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in self._position.items()])
        self.stall.assigned(time.monotonic())
        if self.on_consumer is not None:
            self.on_consumer(consumer)
        return consumer

    def _new_probe(self) -> Consumer:
        return Consumer(
            {
                **self.client_base,
                "group.id": f"iot-registry-end-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )

    def _renew_probe(self) -> None:
        """A new end client (its first query reads the leaders afresh); the old one closed
        in a thread of its own, as closing waits for its broker threads (a dead node's)."""
        old, self._probe = self._probe, self._new_probe()
        if old is not None:
            threading.Thread(target=old.close, name="registry-probe-close", daemon=True).start()

    @property
    def position(self) -> dict[int, int]:
        return dict(self._position)

    def catch_up(self, strict: bool = True) -> list[Record]:
        """The records committed since the last call, up to the topic's end as Kafka reports
        it now. If Kafka does not answer within the timeout: ``strict`` raises
        :class:`StoreError` (the caller must not decide on what it holds); otherwise the
        records the consumer has already fetched are returned (it fetches continuously, so
        that is every change but those of its last fetch interval, about 0.1 s), and for
        ``QUIET_S`` Kafka is not asked again (a page stays responsive while Kafka is down)."""
        with self._lock:
            consumer = self._consumer
            if consumer is None:
                raise StoreError("registry follower not started")
            since = time.monotonic() - self._failed_at
            if not strict and since < QUIET_S:
                return self._queued(consumer)
            if strict and since < STRICT_QUIET_S:  # many requests, one timeout: refuse at once
                raise StoreError(
                    f"Kafka at {self.bootstrap} did not say where {self.topic} ends "
                    f"{since:.1f} s ago; asked again after {STRICT_QUIET_S:.0f} s"
                )
            deadline = time.monotonic() + self.timeout
            try:
                ends = {p: self._end(p) for p in self._position}
            except StoreError:
                self._failed_at = time.monotonic()
                self._renew_probe()
                if strict:
                    raise
                return self._queued(consumer)
            consumer = self._renew_if_stalled(consumer, ends)
            records: list[Record] = []
            while any(self._position[p] < end for p, end in ends.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    if not strict:
                        return records
                    raise StoreError(
                        f"reading {self.topic}: Kafka did not deliver up to its end "
                        f"within {self.timeout:.0f} s"
                    )
                msg = consumer.poll(min(left, 0.5))
                if msg is not None:
                    self._take(msg, records)
            return records

    def _renew_if_stalled(self, consumer: Consumer, ends: dict[int, int]) -> Consumer:
        """``consumer``, or a new one at the same positions if it stalled (see the module)."""
        stuck = self.stall.check(
            time.monotonic(),
            {(self.topic, p): o for p, o in self._position.items()},
            {(self.topic, p): e for p, e in ends.items()},
        )
        if not stuck:
            return consumer
        stalled_log(self.stall, stuck, "registry follower: its")
        self._consumer = self._new_consumer()
        retire(consumer)
        return self._consumer

    def _take(self, msg: Message, records: list[Record]) -> None:
        partition, offset = msg.partition() or 0, msg.offset() or 0
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                self._position[partition] = max(self._position[partition], offset)
                return
            raise StoreError(f"reading the registry: {err}")
        records.append((msg.key() or b"", msg.value()))
        self._position[partition] = offset + 1

    def _queued(self, consumer: Consumer) -> list[Record]:
        """What the consumer fetched already, without asking Kafka."""
        records: list[Record] = []
        while (msg := consumer.poll(0)) is not None:
            err = msg.error()
            if err is None or err.code() == KafkaError._PARTITION_EOF:
                self._take(msg, records)
        return records

    def _end(self, partition: int) -> int:
        """The partition's end for a read_committed reader (its last stable offset)."""
        assert self._probe is not None
        try:
            _low, high = self._probe.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=self.timeout, cached=False
            )
        except KafkaException as exc:
            raise StoreError(
                f"Kafka at {self.bootstrap} did not say where {self.topic} ends: {exc.args[0]}"
            ) from exc
        return int(high)

    def close(self) -> None:
        with self._lock:
            for client in (self._consumer, self._probe):
                if client is not None:
                    client.close()
            self._consumer = self._probe = None
