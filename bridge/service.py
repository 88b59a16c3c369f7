"""The telemetry path: MQTT (Mosquitto) -> Kafka, acknowledged only once Kafka holds it.

:class:`TelemetryBridge` is the life cycle and health around the produce/ack pipeline
(:mod:`bridge.pipeline`): wait for Kafka and its topics, connect the subscriber, drain on stop,
report readiness and gauges. One thread does the work, the asyncio event loop; a
"kafka-health" thread only probes Kafka while it looks unreachable (probes block).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Producer

from bridge.config import BridgeConfig
from bridge.errors import FatalKafkaError
from bridge.kafka_settings import consumer_security, producer_config
from bridge.mqtt_client import MqttConnectRefusedError, Subscriber
from bridge.mqtt_settings import mqtt_session_settings
from bridge.pipeline import FATAL_DELIVERY_CODES, TelemetryPipeline
from bridge.quota import parse_rates
from bridge.tenant_watch import TenantWatch

__all__ = ["TelemetryBridge"]

log = logging.getLogger(__name__)

_STUCK_AFTER_S = 10.0
# The hot path allocates a few small objects per message that live until Kafka confirms them
# (tens of ms): with CPython's default gen-0 threshold (700) they were scanned and promoted
# again and again, 5-8% of the loop thread in py-spy profiles. They hold no cycles, so
# collecting rarely costs no memory; the start-up's objects are frozen out of every scan.
_GC_THRESHOLDS = (100_000, 50, 100)


def tune_gc() -> None:
    """Collect cycles rarely and never scan what exists now (called once started)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)


class TelemetryBridge(TelemetryPipeline):
    """MQTT telemetry/events/status -> Kafka, with ordered ack-after-delivery."""

    def __init__(self, config: BridgeConfig) -> None:
        super().__init__(config)
        self.started = False
        self._poll_thread: threading.Thread | None = None
        self._tenant_watch: TenantWatch | None = None

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

    def request_tenant(self, tenant: str) -> None:
        if self._tenant_watch is not None:
            self._tenant_watch.request(tenant)

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
        watch = self._tenant_watch = TenantWatch(
            bootstrap=cfg.kafka_bootstrap,
            base=self.topics,
            static_rates=parse_rates(cfg.tenant_quotas),
            registry_topic=cfg.registry_topic,
            refresh_s=cfg.tenant_refresh_s,
            publish=lambda ready, rates: loop.call_soon_threadsafe(
                self.apply_tenants, ready, rates
            ),
            admin_config=consumer_security(cfg),
        )
        # the registry's tenants (topics checked, quotas known) before the first message
        try:
            await asyncio.to_thread(watch.refresh)
        except KafkaException as exc:
            log.error("tenant check failed (%s); the watcher retries", exc)
        watch.start()
        self._poll_thread = threading.Thread(
            target=self._health_loop, name="kafka-health", daemon=True
        )
        self._poll_thread.start()
        self._tick()
        tune_gc()
        self.subscriber = Subscriber(
            self,
            client_id=cfg.mqtt_client_id,
            filters=cfg.mqtt_subscriptions,
            **mqtt_session_settings(cfg),
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
                    if tmd.partitions:
                        self.partition_counts[topic] = len(tmd.partitions)
                    break
                if time.monotonic() > grace_until:
                    raise FatalKafkaError(
                        f"Kafka topic {topic!r} is not usable ({err}): create it (iot-stack up "
                        f"creates the design's topics) or point the bridge at another topic "
                        f"(IOT_TOPIC_*), or grant this client access"
                    )
                await self._sleep_unless_stopped(0.25)
        self.kafka_ok = True
        self._routes.clear()  # routes made before the partition counts were known
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
        if self._tenant_watch is not None:
            await asyncio.to_thread(self._tenant_watch.stop)
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

    # --- Kafka side --------------------------------------------------------------------------

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
        if err.fatal() or err.code() in FATAL_DELIVERY_CODES:
            self._set_fatal(f"fatal Kafka error: {err.str()}")
        elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT):
            if err.code() == KafkaError._ALL_BROKERS_DOWN:
                self.kafka_ok = False
            log.warning("Kafka: %s", err.str())
        else:
            log.warning("Kafka: %s", err.str())
