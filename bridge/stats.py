"""Bridge counters kept as plain ints on the hot path, exported to Prometheus at scrape time.

Incrementing a prometheus-client Counter takes a lock per call; at tens of thousands of
messages per second that is measurable, so the hot path bumps ints here and a custom
collector turns them into metric families when ``/metrics`` is scraped.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

LATENCY_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1,
    0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class LatencyHistogram:
    """Cumulative-at-export histogram; one writer thread (librdkafka's poll thread)."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self.total += seconds

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, n in zip(self.buckets, self.counts, strict=False):
            acc += n
            out.append((repr(bound), float(acc)))
        acc += self.counts[-1]
        out.append(("+Inf", float(acc)))
        return out, self.total


class BridgeStats:
    """Every counter the bridge exports."""

    def __init__(self) -> None:
        self.received: Counter[str] = Counter()  # by channel (telemetry/events/status/other)
        self.received_bytes = 0
        self.produced: Counter[str] = Counter()  # confirmed by Kafka, by kind
        self.acked = 0
        self.redelivered = 0  # PUBLISH with DUP set
        self.dlq: Counter[str] = Counter()  # by error code
        self.kafka_errors: Counter[str] = Counter()  # by librdkafka error name
        self.latency = LatencyHistogram()
        # Kafka's delivery report -> PUBACK written: the wait behind earlier unconfirmed
        # messages (PUBACKs go out in arrival order), acknowledged messages only
        self.ack_lag = LatencyHistogram()
        self.paused = 0  # times reading was paused for back-pressure
        self.tenant_received: Counter[str] = Counter()  # by tenant
        self.tenant_dlq: Counter[tuple[str, str]] = Counter()  # by (tenant, error code)


class BridgeCollector(Collector):
    """Prometheus view of :class:`BridgeStats` plus live gauges."""

    def __init__(
        self,
        stats: BridgeStats,
        gauges: Callable[[], dict[str, tuple[str, float]]],
        mqtt_errors: Callable[[], dict[str, int]],
    ) -> None:
        self.stats = stats
        self.gauges = gauges
        self.mqtt_errors = mqtt_errors

    def describe(self) -> Iterator[CounterMetricFamily]:
        return iter(())

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        s = self.stats
        yield _counter_by(
            "iot_bridge_received", "MQTT messages received, by channel", "channel", s.received
        )
        yield CounterMetricFamily(
            "iot_bridge_received_bytes", "MQTT payload bytes received", value=s.received_bytes
        )
        yield _counter_by(
            "iot_bridge_produced",
            "Records Kafka confirmed, by kind (telemetry/events/presence/dlq)",
            "kind",
            s.produced,
        )
        yield CounterMetricFamily(
            "iot_bridge_acked", "QoS 1 PUBACKs sent after Kafka confirmed", value=s.acked
        )
        yield CounterMetricFamily(
            "iot_bridge_redelivered",
            "MQTT messages received with the DUP flag (redeliveries)",
            value=s.redelivered,
        )
        yield _counter_by(
            "iot_bridge_dlq", "Messages sent to the DLQ, by error code", "code", s.dlq
        )
        yield _counter_by(
            "iot_bridge_kafka_errors", "Kafka errors, by error name", "error", s.kafka_errors
        )
        yield _counter_by(
            "iot_bridge_mqtt_errors", "MQTT connection errors, by kind", "kind", self.mqtt_errors()
        )
        yield CounterMetricFamily(
            "iot_bridge_backpressure_pauses",
            "Times the bridge stopped reading from Mosquitto because the pending bound was hit",
            value=s.paused,
        )
        yield _counter_by(
            "iot_bridge_tenant_received",
            "MQTT messages received, by tenant (from the topic root the device's login allows)",
            "tenant",
            s.tenant_received,
        )
        tenant_dlq = CounterMetricFamily(
            "iot_bridge_tenant_dlq",
            "Messages sent to a DLQ, by tenant and error code (quota_exceeded: over the "
            "tenant's msgs/s quota)",
            labels=["tenant", "code"],
        )
        for (tenant, code), n in sorted(s.tenant_dlq.items()):
            tenant_dlq.add_metric([tenant, code], n)
        yield tenant_dlq
        buckets, total = s.latency.snapshot()
        yield HistogramMetricFamily(
            "iot_bridge_produce_latency_seconds",
            "Time from receiving an MQTT message to Kafka's delivery report",
            buckets=buckets,
            sum_value=total,
        )
        buckets, total = s.ack_lag.snapshot()
        yield HistogramMetricFamily(
            "iot_bridge_ack_lag_seconds",
            "Time from Kafka's delivery report to the PUBACK written (the wait behind earlier "
            "unconfirmed messages: PUBACKs go out in arrival order)",
            buckets=buckets,
            sum_value=total,
        )
        for name, (help_text, value) in self.gauges().items():
            yield GaugeMetricFamily(name, help_text, value=value)


def _counter_by(name: str, doc: str, label: str, counts: Mapping[str, int]) -> CounterMetricFamily:
    """A counter with one sample per key of ``counts`` (sorted), the key as its ``label``."""
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, n in sorted(counts.items()):
        family.add_metric([key], n)
    return family
