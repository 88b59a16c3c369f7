"""Prometheus metrics of `iot-api` (its own registry, served at ``/metrics``)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from api.mr.json_metrics import RateMeter


class _Metered:
    """A Prometheus counter that also feeds MR's rate meter (``/metrics`` as JSON)."""

    def __init__(self, counter: Counter, meter: RateMeter) -> None:
        self.counter = counter
        self.meter = meter

    def inc(self, amount: int = 1) -> None:
        self.counter.inc(amount)
        self.meter.add(amount)


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "iot_api_requests", "HTTP requests answered", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "iot_api_request_seconds", "Time to answer a request", ["route"],
            registry=self.registry,
        )  # fmt: skip
        self.started_epoch_s = time.time()
        self.recv, self.send = RateMeter(), RateMeter()
        self.published = _Metered(Counter(
            "iot_api_published_messages", "Messages Kafka acknowledged for publishes",
            registry=self.registry,
        ), self.recv)  # fmt: skip
        self.delivered = _Metered(Counter(
            "iot_api_delivered_messages", "Messages returned to consumers and committed",
            registry=self.registry,
        ), self.send)  # fmt: skip
        self.consumers = Gauge(
            "iot_api_consumers", "Cached (topic, group, id) consumers", registry=self.registry
        )
