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

import logging
import time
from collections.abc import Callable

from bridge.mapping import (
    ErrorCode,
    KafkaRecord,
    Rejection,
    dlq_record,
    map_message,
    tenant_topics,
)
from bridge.partitioner import partition_for
from bridge.pending import Group, PartitionQueue
from bridge.pipeline_kafka import FATAL_DELIVERY_CODES, KafkaSide
from bridge.routes import QOS_HEADERS, Route, accepts_payload, route_for
from bridge.topics import DEFAULT_TENANT, device_id_hint, parse_device_topic_cached

__all__ = ["FATAL_DELIVERY_CODES", "TelemetryPipeline"]

# the name these log lines had before the pipeline left bridge/service.py: log filters keep working
log = logging.getLogger("bridge.service")

_ROUTE_CACHE_MAX = 200_000  # one entry per device channel, like the subscriber's topic cache


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


class TelemetryPipeline(KafkaSide):
    """The pipeline's state and its event-loop callbacks (the :class:`PublishSink` of the
    subscriber, the tick that polls the producer)."""

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
