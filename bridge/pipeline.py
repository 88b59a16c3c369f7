"""The telemetry path's produce/ack pipeline: MQTT PUBLISH in, Kafka record out, PUBACK once
Kafka holds it.

Everything here runs on the asyncio event loop, the one thread of the hot path: the mapping,
``produce()``, ``Producer.poll()`` (every ~1 ms while messages are pending, so delivery reports
run here) and the PUBACKs. After each poll the confirmed prefix of the
:class:`~bridge.pending.AckWindow` is released and its PUBACKs go out in one write. Reading
pauses while the window is full (back-pressure). The life cycle around it (start, topic
checks, shutdown, health) is :class:`bridge.service.TelemetryBridge`.

Every ``produce()`` passes its arguments by position (topic, value, key, partition,
on_delivery, callback, timestamp, headers): confluent-kafka's keyword parsing cost about
0.25 us a call, a quarter of the call.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from bridge.config import BridgeConfig
from bridge.flush import AdaptiveLinger, LingerPolicy
from bridge.mapping import (
    ErrorCode,
    KafkaRecord,
    Rejection,
    Topics,
    dlq_record,
    map_message,
    tenant_topics,
)
from bridge.mqtt_client import Subscriber
from bridge.partitioner import partition_for
from bridge.pending import AckWindow, Group, PartitionQueue, set_clock
from bridge.quota import TenantQuotas, parse_rates
from bridge.routes import QOS_HEADERS, Route, accepts_payload, route_for
from bridge.stats import BridgeStats
from bridge.topics import DEFAULT_TENANT, device_id_hint, parse_device_topic_cached

__all__ = ["FATAL_DELIVERY_CODES", "TelemetryPipeline"]

# the name these log lines had before the pipeline left bridge/service.py: log filters keep working
log = logging.getLogger("bridge.service")

FATAL_DELIVERY_CODES = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError._FATAL,
    }
)
_RESUME_FRACTION = 0.8
_ROUTE_CACHE_MAX = 200_000  # one entry per device channel, like the subscriber's topic cache
_FAST_TICK_S = 0.001
_IDLE_TICK_S = 0.1
# flush()'s wait for an early send: long enough for librdkafka's broker thread to wake up and
# see the flush (a zero wait often returned before it did, and the batch kept lingering)
_FLUSH_WAIT_S = 0.001


def _take_marker(queue: PartitionQueue) -> tuple[KafkaRecord, Callable[..., None], int]:
    """The queue's held record as its partition's marker: the record, the report that closes
    the queue's segment, the partition. The queue holds nothing afterwards."""
    held = queue.held
    assert held is not None
    queue.held = None
    key, value, headers = held
    return (
        KafkaRecord(queue.topic, key, value, headers),
        queue.close_segment().delivered,
        queue.partition,
    )


def _tenant_of(topic: str) -> str:
    parsed = parse_device_topic_cached(topic)
    return DEFAULT_TENANT if parsed is None else parsed[4]


class TelemetryPipeline:
    """The pipeline's state and its event-loop callbacks (the :class:`PublishSink` of the
    subscriber, the tick that polls the producer)."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.stats = BridgeStats()
        self.window = AckWindow()
        self.topics = Topics(
            telemetry=config.topic_telemetry,
            events=config.topic_events,
            dlq=config.topic_dlq,
            presence=config.topic_presence,
        )
        self._kinds = {
            config.topic_telemetry: "telemetry",
            config.topic_events: "events",
            config.topic_dlq: "dlq",
            config.topic_presence: "presence",
        }
        self.quotas = TenantQuotas()
        self.quotas.set_rates(parse_rates(config.tenant_quotas), time.monotonic())
        # tenants whose Kafka topics exist (bridge.tenant_watch checks them off the loop)
        self.ready_tenants: frozenset[str] = frozenset({DEFAULT_TENANT})
        self._tenants_requested: set[str] = set()
        self.kafka_ok = False
        self.subscriber: Subscriber | None = None
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # records librdkafka's queue refused (BufferError), in order: record, its delivery
        # callback, its partition (-1: the partitioner's)
        self._backlog: deque[tuple[KafkaRecord, Callable[..., None], int]] = deque()
        # Sparse delivery reports (bridge.pending.Segment): one report per Kafka partition and
        # socket read instead of one per record. Only safe when the producer never times a
        # message out (gap-less guarantee, see producer_config).
        self.sparse_reports = (
            config.kafka_message_timeout_ms == 0 and not config.kafka_report_per_message
        )
        self.partition_counts: dict[str, int] = {}  # Kafka topic -> partitions (at start)
        self._queues: dict[tuple[str, int], PartitionQueue] = {}
        self._holding: list[PartitionQueue] = []  # the queues with a held record
        self._paused = False
        self._stopping = False
        # asyncio.Event binds to the running loop on first use, so creating them here is safe
        # and lets request_stop() work even before run() started
        self._stop_requested = asyncio.Event()
        self._drained = asyncio.Event()
        self._tick_handle: asyncio.TimerHandle | None = None
        self._tick_fast = False
        self.last_tick = time.monotonic()
        self._poll_stop = threading.Event()
        self._fatal: str | None = None
        self._bad_generation = -1
        self.produced_count = 0  # messages handed to the producer (the adaptive linger's input)
        # the back-pressure bounds, read per message
        self._max_pending = config.pending_max_messages
        self._max_pending_bytes = config.pending_max_bytes - config.max_payload_bytes
        self._max_payload = config.max_payload_bytes
        # MQTT topic -> what its records share (bridge.routes); cleared when tenants change
        self._routes: dict[str, Route] = {}
        # the received_at header and its millisecond, also the current socket read's wall clock
        self._received_ms = -1
        self._received_header: tuple[str, bytes] = ("received_at", b"")
        # the clocks of the current socket read, read at its first message (on_read_done
        # marks them stale): every message of one read arrived at the same time
        self._read_clock_stale = True
        self._read_mono = 0.0
        self._group: Group | None = None  # the group the read's messages join (bridge.pending)
        self.linger: AdaptiveLinger | None = None
        if config.kafka_adaptive_linger_ms:
            top = min(config.kafka_adaptive_linger_ms, config.kafka_linger_ms) / 1000
            self.linger = AdaptiveLinger(
                LingerPolicy(
                    min_s=0.0,
                    max_s=top,
                    high_rate=float(config.kafka_adaptive_high_rate),
                ),
                time.monotonic(),
            )

    # --- MQTT side (event loop) --------------------------------------------------------------

    def on_connection_change(self, generation: int, connected: bool) -> None:
        if connected and self._paused and self.subscriber is not None:
            self.subscriber.pause_reading()

    def on_publish(self, topic: str, payload: bytes, qos: int, packet_id: int, dup: bool) -> None:
        stats = self.stats
        if self._read_clock_stale:
            self._read_clock_stale = False
            self._read_mono = time.monotonic()
            now_ms = time.time_ns() // 1_000_000
            if now_ms != self._received_ms:
                self._received_ms = now_ms
                self._received_header = ("received_at", str(now_ms).encode())
        else:
            now_ms = self._received_ms
        size = len(payload)
        route = self._routes.get(topic)
        if route is None:
            route = self._new_route(topic)
        tenant = route.tenant
        quotas = self.quotas
        rec: KafkaRecord | None = None
        kafka_topic = route.kafka_topic
        headers: list[tuple[str, bytes]] | None = None
        if quotas.buckets and not quotas.allow(tenant, time.monotonic()):
            rec = self._over_quota(topic, payload, now_ms)
        elif (
            route.fast
            and size <= self._max_payload
            and accepts_payload(payload, route.device_id, route.telemetry)
        ):
            # the common message: one parse, one check, the topic's precomputed parts
            qos_header = QOS_HEADERS[qos] if 0 <= qos <= 2 else ("qos", str(qos).encode())
            if route.tenant_header is None:
                headers = [route.topic_header, self._received_header, qos_header]
            else:
                headers = [
                    route.topic_header,
                    self._received_header,
                    qos_header,
                    route.tenant_header,
                ]
        if headers is None:
            if rec is None:
                rec = map_message(
                    topic,
                    payload,
                    qos,
                    now_ms,
                    topics=self.topics,
                    max_payload_bytes=self._max_payload,
                )
            tenant = rec.tenant
            if tenant not in self.ready_tenants:
                rec = self._not_ready(rec, topic, payload, now_ms)
            if rec.error is not None:
                stats.dlq[rec.error.value] += 1
                stats.tenant_dlq[tenant, rec.error.value] += 1
                log.debug("DLQ %s %s: %s", rec.error.value, topic, rec.detail)
            kafka_topic = rec.topic
            kind = self._kinds[kafka_topic]
            key, value, headers = rec.key, rec.value, rec.headers
        else:
            kind = route.kind
        stats.received[route.channel] += 1
        stats.tenant_received[tenant] += 1
        stats.received_bytes += size
        if dup:
            stats.redelivered += 1
        group = self._group
        if group is None or group.topic != kind:
            group = self._new_group(kind)
        group.count += 1
        group.size += size
        if packet_id:
            group.packet_ids.append(packet_id)
        window = self.window
        window.count += 1
        window.bytes += size
        self.produced_count += 1
        if not self._tick_fast:
            self._speed_up_ticks()
        if rec is None:
            queue = route.queue
            if queue is not None:
                # hold this record back as its partition's marker; produce the one it replaces
                # without a report of its own (the next marker's report covers it)
                held = queue.held
                backlogged = bool(self._backlog)
                if not backlogged and held is None:
                    self._holding.append(queue)
                elif not backlogged:
                    try:
                        self._producer.produce(
                            kafka_topic, held[1], held[0], queue.partition, None, None, 0, held[2]
                        )
                    except BufferError:
                        self._held_to_backlog()
                        self._pause()
                        backlogged = True
                if backlogged:  # behind the backlog, on the partition it computed
                    group.pending += 1
                    self._backlog.append(
                        (
                            KafkaRecord(kafka_topic, route.key, payload, headers),
                            group.delivered,
                            queue.partition,
                        )
                    )
                else:
                    queue.held = (route.key, payload, headers)
                    queue.join(group)
                if window.count >= self._max_pending or window.bytes >= self._max_pending_bytes:
                    self._pause()
                return
            key, value = route.key, payload
        elif self._holding:
            self._produce_held()  # a general record after the held ones of its partition
        group.pending += 1  # a report of its own
        if self._backlog:
            self._backlog.append(
                (KafkaRecord(kafka_topic, key, value, headers), group.delivered, -1)
            )
        else:
            try:
                self._producer.produce(
                    kafka_topic, value, key, -1, group.delivered, None, 0, headers
                )
            except BufferError:
                self._backlog.append(
                    (KafkaRecord(kafka_topic, key, value, headers), group.delivered, -1)
                )
                self._pause()
        if window.count >= self._max_pending or window.bytes >= self._max_pending_bytes:
            self._pause()

    def _new_group(self, kind: str) -> Group:
        sub = self.subscriber
        group = self._group = Group(sub.generation if sub is not None else 0, kind, self._read_mono)
        self.window.add(group)
        return group

    def on_read_done(self) -> None:
        """The end of a socket read: produce every held record as its partition's marker; the
        next read starts a new group and reads the clock again."""
        self._read_clock_stale = True
        self._group = None
        self.window.note_high_water()
        if self._holding:
            self._produce_held()

    def _produce_held(self) -> None:
        """Produce every held record as its partition's marker."""
        holding = self._holding
        produce = self._producer.produce
        for i, queue in enumerate(holding):
            marker = _take_marker(queue)
            rec, delivered, partition = marker
            try:
                produce(rec.topic, rec.value, rec.key, partition, delivered, None, 0, rec.headers)
            except BufferError:
                self._backlog.append(marker)
                del holding[: i + 1]
                self._held_to_backlog()
                self._pause()
                return
        holding.clear()

    def _held_to_backlog(self) -> None:
        """Librdkafka refused a record: every held record goes to the backlog, as its
        partition's marker, ahead of anything newer (the backlog keeps each partition's order)."""
        self._backlog.extend(_take_marker(queue) for queue in self._holding)
        self._holding.clear()

    def _new_route(self, topic: str) -> Route:
        route = route_for(topic, self.topics, self.ready_tenants, self._kinds)
        if self.sparse_reports and route.fast and route.key is not None:
            count = self.partition_counts.get(route.kafka_topic)
            if count:
                where = (route.kafka_topic, partition_for(route.key, count))
                queue = self._queues.get(where)
                if queue is None:
                    queue = self._queues[where] = PartitionQueue(*where)
                route = route._replace(queue=queue)
        if len(self._routes) < _ROUTE_CACHE_MAX:
            self._routes[topic] = route
        return route

    # --- tenants ------------------------------------------------------------------------------

    def _over_quota(self, topic: str, payload: bytes, now_ms: int) -> KafkaRecord:
        """The tenant's DLQ record ``quota_exceeded`` (no parsing: rejecting must stay cheap)."""
        tenant = _tenant_of(topic)
        hint = device_id_hint(topic)
        rate = self.quotas.buckets[tenant].rate
        return dlq_record(
            tenant_topics(self.topics, tenant),
            topic,
            payload,
            str(now_ms).encode(),
            None if hint is None else hint.encode(),
            rejection=Rejection(
                ErrorCode.QUOTA_EXCEEDED, f"tenant {tenant!r} over its quota of {rate:g} msgs/s"
            ),
            tenant=tenant,
        )

    def _not_ready(self, rec: KafkaRecord, topic: str, payload: bytes, now_ms: int) -> KafkaRecord:
        """A tenant met before its Kafka topics were checked: the message goes to the default
        DLQ as ``tenant_not_ready`` (acknowledged, kept) while the watcher checks them."""
        tenant = rec.tenant
        if tenant not in self._tenants_requested:
            self._tenants_requested.add(tenant)
            self.request_tenant(tenant)
        return dlq_record(
            self.topics,
            topic,
            payload,
            str(now_ms).encode(),
            rec.key,
            rejection=Rejection(
                ErrorCode.TENANT_NOT_READY, f"Kafka topics of tenant {tenant!r} not checked yet"
            ),
            tenant=tenant,
        )

    def request_tenant(self, tenant: str) -> None:
        """Ask for ``tenant``'s topics to be checked (the service wires the watcher in)."""

    def apply_tenants(self, ready: frozenset[str], rates: dict[str, float | None]) -> None:
        """The watcher's news (on the loop): tenants whose topics exist, current quotas."""
        for tenant in ready - self.ready_tenants:
            for kind, name in zip(
                ("telemetry", "events", "dlq", "presence"),
                tenant_topics(self.topics, tenant).all(),
                strict=True,
            ):
                self._kinds[name] = kind
        self.ready_tenants = ready | {DEFAULT_TENANT}
        self._routes.clear()  # a route knows whether its tenant was ready
        self._tenants_requested -= ready
        self.quotas.set_rates(rates, time.monotonic())

    def _pause(self) -> None:
        if not self._paused:
            self._paused = True
            self.stats.paused += 1
            if self.subscriber is not None:
                self.subscriber.pause_reading()
            log.info(
                "back-pressure: %d messages / %d bytes pending; pausing MQTT reads",
                self.window.count,
                self.window.bytes,
            )

    def _maybe_resume(self) -> None:
        cfg = self.config
        if (
            self._paused
            and not self._backlog
            and not self._stopping
            and self.window.count < cfg.pending_max_messages * _RESUME_FRACTION
            and self.window.bytes < cfg.pending_max_bytes * _RESUME_FRACTION
        ):
            self._paused = False
            if self.subscriber is not None:
                self.subscriber.resume_reading()
            log.info("back-pressure released; resuming MQTT reads")

    # --- Kafka side --------------------------------------------------------------------------

    def _tick(self) -> None:
        """Serve librdkafka callbacks on the loop: every ~1 ms while messages are pending.

        Polling here rather than in a thread keeps delivery callbacks, the window and the
        PUBACK writes on one thread: no GIL hand-offs or cross-thread wake-ups per batch.
        """
        self._tick_handle = None
        now = self.last_tick = time.monotonic()
        producer = self._producer
        if producer is None or self._poll_stop.is_set():
            return
        set_clock(now)  # the delivery callbacks below stamp their entries with it
        served = producer.poll(0)
        linger = self.linger
        if linger is not None and linger.due(now, self.produced_count):
            # the rate is low: send what lingers now (flush treats linger.ms as expired)
            producer.flush(_FLUSH_WAIT_S)
            linger.flushed(self.produced_count)
            served = 1
        if served:
            self._drain()
        busy = bool(self.window.count or self._backlog)
        self._tick_fast = busy
        loop = self._loop
        assert loop is not None
        self._tick_handle = loop.call_later(_FAST_TICK_S if busy else _IDLE_TICK_S, self._tick)

    def _speed_up_ticks(self) -> None:
        if not self._tick_fast and self._loop is not None:
            self._tick_fast = True
            if self._tick_handle is not None:
                self._tick_handle.cancel()
            self._tick_handle = self._loop.call_later(_FAST_TICK_S, self._tick)

    def _set_fatal(self, message: str) -> None:
        if self._fatal is None:
            self._fatal = message
            log.critical("%s; stopping without acknowledging unconfirmed messages", message)
            loop = self._loop
            if loop is not None and self._stop_requested is not None:
                loop.call_soon_threadsafe(self._stop_requested.set)

    def _drain(self) -> None:
        """Release the confirmed prefix of the window: count, ack in order (event loop)."""
        done = self.window.pop_done()
        sub = self.subscriber
        if done:
            if done[-1] is self._group:  # released while its read was open: the next starts anew
                self._group = None
            stats = self.stats
            now = time.monotonic()
            generation = sub.generation if sub is not None else -1
            ack_generation = generation if generation != self._bad_generation else None
            acks: list[int] = []
            # per group, not per message: the histograms' buckets (a group's messages share
            # their read's time and their last report's), the acks, the counts by topic kind
            hist = stats.latency
            counts = hist.counts
            buckets = hist.buckets
            total = 0.0
            lag_hist = stats.ack_lag
            lag_counts = lag_hist.counts
            lag_buckets = lag_hist.buckets
            lag_total = 0.0
            first_bound = lag_buckets[0]
            kinds: dict[str, int] = {}
            for g in done:
                err = g.error
                if err is not None:
                    self._on_delivery_error(g, err)
                    # nothing after a failed record on its connection may be acknowledged
                    if generation == self._bad_generation:
                        ack_generation = None
                    continue
                n = g.count
                kinds[g.topic] = kinds.get(g.topic, 0) + n
                waited = now - g.sent_at
                counts[bisect_left(buckets, waited)] += n
                total += waited * n
                ids = g.packet_ids
                if ids and g.generation == ack_generation:
                    acks += ids
                    lag = now - g.done_at
                    # the common case, no wait behind another, needs no search
                    lag_bucket = 0 if lag <= first_bound else bisect_left(lag_buckets, lag)
                    lag_counts[lag_bucket] += len(ids)
                    lag_total += lag * len(ids)
            hist.total += total
            lag_hist.total += lag_total
            stats.produced.update(kinds)
            if acks and sub is not None and self._fatal is None and sub.send_acks(generation, acks):
                stats.acked += len(acks)
            if done[-1].error is None:
                self.kafka_ok = True
        if self._backlog:
            self._retry_backlog()
        self._maybe_resume()
        if self._stopping and self.window.count == 0 and self._drained is not None:
            self._drained.set()

    def _on_delivery_error(self, group: Group, err: Any) -> None:
        # counted per message left unacknowledged
        self.stats.kafka_errors[err.name()] += group.count
        if err.fatal() or err.code() in FATAL_DELIVERY_CODES:
            self._set_fatal(f"Kafka refused records for {group.topic}: {err.str()}")
            return
        # Not acknowledged, and nothing after it on this connection may be: drop the
        # connection so Mosquitto redelivers everything unacknowledged (at-least-once).
        sub = self.subscriber
        # once per connection: a failed marker fails every record it covers
        if sub is not None and group.generation == sub.generation != self._bad_generation:
            self._bad_generation = sub.generation
            log.error("Kafka delivery failed (%s); reconnecting to MQTT for redelivery", err.str())
            sub.drop_connection("Kafka delivery failed")

    def _retry_backlog(self) -> None:
        produce = self._producer.produce
        backlog = self._backlog
        while backlog:
            rec, delivered, partition = backlog[0]
            try:
                produce(rec.topic, rec.value, rec.key, partition, delivered, None, 0, rec.headers)
            except BufferError:
                return
            backlog.popleft()
