"""Prometheus metrics of `iot-api` (its own registry, served at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
        self.published = Counter(
            "iot_api_published_messages", "Messages Kafka acknowledged for publishes",
            registry=self.registry,
        )  # fmt: skip
        self.delivered = Counter(
            "iot_api_delivered_messages", "Messages returned to consumers and committed",
            registry=self.registry,
        )  # fmt: skip
        self.consumers = Gauge(
            "iot_api_consumers", "Cached (topic, group, id) consumers", registry=self.registry
        )
