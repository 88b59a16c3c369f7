"""The telemetry pipeline's state (see :mod:`bridge.pipeline`): the window of unacknowledged
messages, the per-partition queues, the producer and loop handles, the tenants' readiness and
quotas, and the back-pressure bounds. Its two sides are :class:`bridge.pipeline_kafka.KafkaSide`
(polling, delivery reports, acks) and :class:`bridge.pipeline.TelemetryPipeline` (the MQTT side).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from bridge.config import BridgeConfig
from bridge.flush import AdaptiveLinger, LingerPolicy
from bridge.mapping import (
    KafkaRecord,
    Topics,
)
from bridge.mqtt_client import Subscriber
from bridge.pending import AckWindow, Group, PartitionQueue
from bridge.quota import TenantQuotas, parse_rates
from bridge.routes import Route
from bridge.stats import BridgeStats
from bridge.topics import DEFAULT_TENANT


class PipelineState:
    """What both sides of the pipeline read and write, set up from the bridge's config."""

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
