"""The telemetry path: MQTT (Mosquitto) -> Kafka, acknowledged only once Kafka holds it.

One thread does the work: the asyncio event loop owns the MQTT connection, the mapping,
``produce()``, ``Producer.poll()`` (every ~1 ms while messages are pending, so delivery reports
run here) and the PUBACKs. After each poll it releases the confirmed prefix of the
:class:`~bridge.pending.AckWindow` and sends its PUBACKs in one write. A "kafka-health" thread
only probes Kafka while it looks unreachable (probes block).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from bridge.config import BridgeConfig, parse_kafka_extra
from bridge.errors import FatalKafkaError
from bridge.mapping import KafkaRecord, Topics, map_message
from bridge.mqtt_client import MqttConnectRefusedError, Subscriber
from bridge.pending import AckWindow, Entry
from bridge.stats import BridgeStats

log = logging.getLogger(__name__)

_FATAL_DELIVERY_CODES = frozenset(
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
_FAST_TICK_S = 0.001
_IDLE_TICK_S = 0.1
_STUCK_AFTER_S = 10.0


def producer_config(config: BridgeConfig) -> dict[str, Any]:
    """librdkafka settings of the bridge's producer."""
    conf: dict[str, Any] = {
        "bootstrap.servers": config.kafka_bootstrap,
        "client.id": config.mqtt_client_id,
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": config.kafka_linger_ms,
        "batch.size": config.kafka_batch_size,
        "compression.type": config.kafka_compression,
        "message.timeout.ms": config.kafka_message_timeout_ms,
        # librdkafka's own queue must never be the bound: the pending window is.
        "queue.buffering.max.messages": config.pending_max_messages + 70000,
        "queue.buffering.max.kbytes": (2 * config.pending_max_bytes) // 1024 + 65536,
        "socket.nagle.disable": True,
    }
    conf.update(parse_kafka_extra(config.kafka_extra))
    return conf


class TelemetryBridge:
    """MQTT telemetry/events/status -> Kafka, with ordered ack-after-delivery."""

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
        self.kafka_ok = False
        self.started = False
        self.subscriber: Subscriber | None = None
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backlog: deque[tuple[KafkaRecord, Entry]] = deque()
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
        self._poll_thread: threading.Thread | None = None
        self._fatal: str | None = None
        self._bad_generation = -1

    # --- status ------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        sub = self.subscriber
        return (
            self.started
            and self.kafka_ok
            and sub is not None
            and sub.connected
            and not self._stopping
            and self._fatal is None
        )

    @property
    def alive(self) -> bool:
        """False if the event loop has not run a tick for 10 s (stuck); True before start."""
        return not self.started or time.monotonic() - self.last_tick < _STUCK_AFTER_S

    def gauges(self) -> dict[str, tuple[str, float]]:
        sub = self.subscriber
        cfg = self.config
        return {
            "iot_bridge_pending_messages": (
                "Messages received but not yet confirmed by Kafka",
                float(self.window.count),
            ),
            "iot_bridge_pending_bytes": ("Payload bytes of pending messages", self.window.bytes),
            "iot_bridge_pending_high_water_messages": (
                "Largest number of pending messages seen since start",
                self.window.high_water_count,
            ),
            "iot_bridge_pending_high_water_bytes": (
                "Largest pending payload bytes seen since start",
                self.window.high_water_bytes,
            ),
            "iot_bridge_pending_max_messages": (
                "Configured bound on pending messages",
                cfg.pending_max_messages,
            ),
            "iot_bridge_pending_max_bytes": (
                "Configured bound on pending bytes",
                cfg.pending_max_bytes,
            ),
            "iot_bridge_pending_oldest_seconds": (
                "Age of the oldest pending message",
                self.window.oldest_age(),
            ),
            "iot_bridge_reading_paused": (
                "1 while reading from Mosquitto is paused by back-pressure",
                1.0 if self._paused else 0.0,
            ),
            "iot_bridge_mqtt_connected": (
                "1 while connected and subscribed to Mosquitto",
                1.0 if sub is not None and sub.connected else 0.0,
            ),
            "iot_bridge_mqtt_connects": (
                "Successful MQTT connections since start",
                float(sub.connects if sub is not None else 0),
            ),
            "iot_bridge_kafka_reachable": (
                "1 while Kafka answers",
                1.0 if self.kafka_ok else 0.0,
            ),
            "iot_bridge_ready": ("1 while ready", 1.0 if self.ready else 0.0),
        }

    def mqtt_errors(self) -> dict[str, int]:
        return dict(self.subscriber.errors) if self.subscriber is not None else {}

    # --- control -----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin a graceful stop (safe from a signal handler on the loop)."""
        if self._stop_requested is not None:
            self._stop_requested.set()

    async def run(self) -> int:
        """Run until stopped; returns the process exit code (0 ok, 1 fatal error)."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._producer = Producer(
            producer_config(cfg)
            | {"error_cb": self._on_kafka_error, "logger": logging.getLogger("librdkafka")}
        )
        try:
            await self._check_topics()
        except FatalKafkaError as exc:
            log.critical("%s", exc)
            return 1
        if self._stop_requested.is_set():
            return 0
        self._poll_thread = threading.Thread(
            target=self._health_loop, name="kafka-health", daemon=True
        )
        self._poll_thread.start()
        self._tick()
        self.subscriber = Subscriber(
            self,
            host=cfg.mqtt_host,
            port=cfg.mqtt_port,
            client_id=cfg.mqtt_client_id,
            filters=cfg.mqtt_subscriptions,
            keepalive=cfg.mqtt_keepalive_s,
            session_expiry=cfg.mqtt_session_expiry_s,
            receive_maximum=cfg.mqtt_receive_maximum,
            username=cfg.mqtt_username,
            password=cfg.mqtt_password,
            reconnect_min_s=cfg.mqtt_reconnect_min_s,
            reconnect_max_s=cfg.mqtt_reconnect_max_s,
        )
        self.started = True
        mqtt_task = asyncio.create_task(self.subscriber.run(), name="mqtt")
        stop_task = asyncio.create_task(self._stop_requested.wait(), name="stop")
        await asyncio.wait({mqtt_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if mqtt_task.done():
            failure = mqtt_task.exception()
            if isinstance(failure, MqttConnectRefusedError):
                log.critical("%s", failure)
            elif failure is not None:
                log.critical("MQTT side failed: %r", failure)
            code = 1
        if self._fatal is not None:
            code = 1
        await self._shutdown(graceful=code == 0)
        stop_task.cancel()
        if not mqtt_task.done():
            mqtt_task.cancel()
        return code

    async def _check_topics(self) -> None:
        """Wait for Kafka, then make sure every topic we write exists (fatal if one does not)."""
        producer = self._producer
        delay = 0.5
        while not self._stop_requested_now():
            try:
                await asyncio.to_thread(producer.list_topics, None, 5)
                break
            except KafkaException as exc:
                log.warning(
                    "Kafka %s not reachable yet (%s); retrying", self.config.kafka_bootstrap, exc
                )
                self.stats.kafka_errors["startup"] += 1
                await self._sleep_unless_stopped(delay)
                delay = min(delay * 2, 10.0)
        for topic in self._kinds:
            if self._stop_requested_now():
                return
            # A topic created a moment ago may not be in every broker's metadata yet: retry
            # for a short grace period before calling it missing.
            grace_until = time.monotonic() + 5.0
            while not self._stop_requested_now():
                md = await asyncio.to_thread(producer.list_topics, topic, 10)
                tmd = md.topics.get(topic)
                err = None if tmd is None else tmd.error
                if tmd is not None and (
                    err is None or err.code() == KafkaError.LEADER_NOT_AVAILABLE
                ):
                    break
                if time.monotonic() > grace_until:
                    raise FatalKafkaError(
                        f"Kafka topic {topic!r} is not usable ({err}): create it (iot-stack up "
                        f"creates the design's topics) or point the bridge at another topic "
                        f"(IOT_TOPIC_*), or grant this client access"
                    )
                await self._sleep_unless_stopped(0.25)
        self.kafka_ok = True
        log.info(
            "Kafka %s reachable; topics %s present",
            self.config.kafka_bootstrap,
            sorted(self._kinds),
        )

    def _stop_requested_now(self) -> bool:
        return self._stop_requested is not None and self._stop_requested.is_set()

    async def _sleep_unless_stopped(self, seconds: float) -> None:
        assert self._stop_requested is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_requested.wait(), seconds)

    async def _shutdown(self, *, graceful: bool) -> None:
        cfg = self.config
        self._stopping = True
        sub = self.subscriber
        if sub is not None:
            sub.pause_reading()  # stop taking messages
        assert self._drained is not None
        if graceful and self.window.count:
            log.info(
                "stopping: waiting up to %.1f s for Kafka to confirm %d pending messages",
                cfg.shutdown_timeout_s,
                self.window.count,
            )
            self._drain()
            try:
                await asyncio.wait_for(self._drained.wait(), cfg.shutdown_timeout_s)
            except TimeoutError:
                log.warning(
                    "stopping: %d messages not confirmed by Kafka in time; not acknowledged, "
                    "Mosquitto will redeliver them",
                    self.window.count,
                )
        if sub is not None:
            await sub.stop()  # DISCONNECT normal: the session and its queue stay
        self._poll_stop.set()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._poll_thread is not None:
            await asyncio.to_thread(self._poll_thread.join, 5)
        if self._producer is not None:
            remaining = await asyncio.to_thread(self._producer.flush, 2 if graceful else 0)
            if remaining:
                log.info("%d records still queued in the producer at exit", remaining)
        log.info(
            "stopped: received %d, acked %d, dlq %d",
            sum(self.stats.received.values()),
            self.stats.acked,
            sum(self.stats.dlq.values()),
        )

    # --- MQTT side (event loop) --------------------------------------------------------------

    def on_connection_change(self, generation: int, connected: bool) -> None:
        if connected and self._paused and self.subscriber is not None:
            self.subscriber.pause_reading()

    def on_publish(self, topic: str, payload: bytes, qos: int, packet_id: int, dup: bool) -> None:
        stats = self.stats
        rec = map_message(
            topic,
            payload,
            qos,
            time.time_ns() // 1_000_000,
            topics=self.topics,
            max_payload_bytes=self.config.max_payload_bytes,
        )
        channel = topic.rsplit("/", 1)[-1]
        stats.received[channel] += 1
        stats.received_bytes += len(payload)
        if dup:
            stats.redelivered += 1
        if rec.error is not None:
            stats.dlq[rec.error.value] += 1
            log.debug("DLQ %s %s: %s", rec.error.value, topic, rec.detail)
        sub = self.subscriber
        entry = Entry(
            packet_id,
            sub.generation if sub is not None else 0,
            len(payload),
            self._kinds[rec.topic],
        )
        window = self.window
        window.add(entry)
        if not self._tick_fast:
            self._speed_up_ticks()
        if self._backlog:
            self._backlog.append((rec, entry))
        else:
            try:
                self._producer.produce(
                    rec.topic, rec.value, rec.key, on_delivery=entry.delivered, headers=rec.headers
                )
            except BufferError:
                self._backlog.append((rec, entry))
                self._pause()
        if (
            window.count >= self.config.pending_max_messages
            or window.bytes >= self.config.pending_max_bytes - self.config.max_payload_bytes
        ):
            self._pause()

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
        self.last_tick = time.monotonic()
        if self._producer is None or self._poll_stop.is_set():
            return
        if self._producer.poll(0):
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

    def _health_loop(self) -> None:
        """While Kafka looks unreachable, probe it every 2 s (a thread: probes block)."""
        producer = self._producer
        while not self._poll_stop.wait(2.0):
            if not self.kafka_ok:
                try:
                    producer.list_topics(None, 1)
                    self.kafka_ok = True
                    log.info("Kafka reachable again")
                except KafkaException:
                    pass

    def _on_kafka_error(self, err: KafkaError) -> None:
        """librdkafka global errors (served by poll() on the loop, or flush())."""
        self.stats.kafka_errors[err.name()] += 1
        if err.fatal() or err.code() in _FATAL_DELIVERY_CODES:
            self._set_fatal(f"fatal Kafka error: {err.str()}")
        elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT):
            if err.code() == KafkaError._ALL_BROKERS_DOWN:
                self.kafka_ok = False
            log.warning("Kafka: %s", err.str())
        else:
            log.warning("Kafka: %s", err.str())

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
            stats = self.stats
            produced = stats.produced
            observe = stats.latency.observe
            now = time.monotonic()
            generation = sub.generation if sub is not None else -1
            acks: list[int] = []
            for e in done:
                err = e.error
                if err is not None:
                    self._on_delivery_error(e, err)
                    continue
                produced[e.topic] += 1
                observe(now - e.sent_at)
                if e.packet_id and e.generation == generation != self._bad_generation:
                    acks.append(e.packet_id)
            if acks and sub is not None and self._fatal is None and sub.send_acks(generation, acks):
                stats.acked += len(acks)
            if done[-1].error is None:
                self.kafka_ok = True
        if self._backlog:
            self._retry_backlog()
        self._maybe_resume()
        if self._stopping and self.window.count == 0 and self._drained is not None:
            self._drained.set()

    def _on_delivery_error(self, entry: Entry, err: Any) -> None:
        self.stats.kafka_errors[err.name()] += 1
        if err.fatal() or err.code() in _FATAL_DELIVERY_CODES:
            self._set_fatal(f"Kafka refused records for {entry.topic}: {err.str()}")
            return
        # Not acknowledged, and nothing after it on this connection may be: drop the
        # connection so Mosquitto redelivers everything unacknowledged (at-least-once).
        sub = self.subscriber
        if sub is not None and entry.generation == sub.generation:
            self._bad_generation = sub.generation
            log.error("Kafka delivery failed (%s); reconnecting to MQTT for redelivery", err.str())
            sub.drop_connection("Kafka delivery failed")

    def _retry_backlog(self) -> None:
        produce = self._producer.produce
        backlog = self._backlog
        while backlog:
            rec, entry = backlog[0]
            try:
                produce(
                    rec.topic, rec.value, rec.key, on_delivery=entry.delivered, headers=rec.headers
                )
            except BufferError:
                return
            backlog.popleft()
