"""The telemetry pipeline's Kafka side (see :mod:`bridge.pipeline`), on the event loop: the tick
that polls the producer every ~1 ms while messages are pending, the delivery reports that release
the confirmed prefix of the window and send its PUBACKs, Kafka's refusals (fatal, or a reconnect
for redelivery), the backlog librdkafka's queue refused, and the back-pressure pause/resume."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from typing import Any

from confluent_kafka import KafkaError

from bridge.pending import Group, set_clock
from bridge.pipeline_state import PipelineState

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


class KafkaSide(PipelineState):
    """The producer's side of :class:`bridge.pipeline.TelemetryPipeline`."""

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
