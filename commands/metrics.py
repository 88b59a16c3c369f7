"""The command path's Prometheus view, and its health endpoint when it runs alone.

``CommandService.stats`` is a dict of plain ints the worker thread bumps; the collector turns
it into metric families when ``/metrics`` is scraped (no prometheus-client lock on the hot
path, as for the telemetry bridge in :mod:`bridge.stats`). Imports neither paho nor
confluent_kafka: anything with ``stats``, ``pending`` and ``is_alive()`` can be exported.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Final, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from health.server import HealthServer

# stats key -> help text; exported as iot_commands_<key>_total (always, 0 until counted). A key
# the service counts that is not listed here is exported too, with a generic help text.
COUNTERS: Final[Mapping[str, str]] = {
    "commands": "Command records read from the commands topic and accepted",
    "rejected": "Command records rejected as bad input (status rejected)",
    "published": "Command publishes to Mosquitto (every attempt counts)",
    "replies": "Device replies received",
    "unknown_replies": "Replies that matched no command this instance tracks",
    "foreign_replies": "Replies for devices whose commands partition another instance owns",
    "expired": "Commands that ended expired (attempts or TTL ran out)",
    "adopted": "Pending commands adopted from the status topic at start-up",
    "consumer_renewals": "iot.commands consumers replaced because they stalled (records in "
    "their partitions past a position that did not move for command_consumer_stall_s)",
}
PREFIX: Final = "iot_commands_"


class CommandStatsSource(Protocol):
    """What the collector reads: :class:`commands.service.CommandService`'s surface."""

    @property
    def stats(self) -> Mapping[str, int]: ...

    @property
    def pending(self) -> int: ...

    def is_alive(self) -> bool: ...


class CommandCollector(Collector):
    """Prometheus view of a command service's counters, its pending set and liveness."""

    def __init__(self, service: CommandStatsSource) -> None:
        self.service = service

    def describe(self) -> Iterator[CounterMetricFamily]:
        return iter(())

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = dict(self.service.stats)  # one copy: the worker thread keeps writing
        for key, help_text in COUNTERS.items():
            yield CounterMetricFamily(PREFIX + key, help_text, value=stats.get(key, 0))
        for key in sorted(set(stats) - set(COUNTERS)):
            yield CounterMetricFamily(PREFIX + key, f"Command path counter {key!r}", stats[key])
        yield GaugeMetricFamily(
            PREFIX + "pending",
            "Commands not yet final that this instance tracks",
            value=self.service.pending,
        )
        yield GaugeMetricFamily(
            PREFIX + "up",
            "1 while the command path's worker thread runs, else 0",
            value=1.0 if self.service.is_alive() else 0.0,
        )


class CommandHealth:
    """Liveness and readiness of a command service run by ``iot-cmd serve``.

    Ready: ``start()`` returned and the worker thread runs. Alive: the service is still
    starting (rebuilding its pending set from Kafka can take a while; a liveness probe must
    not kill it for that), or its worker thread runs; false once the thread ended or
    ``start()`` failed.
    """

    def __init__(self, service: CommandStatsSource) -> None:
        self.service = service
        self._started = threading.Event()
        self._start_failed = threading.Event()

    def mark_started(self) -> None:
        self._started.set()

    def mark_start_failed(self) -> None:
        self._start_failed.set()

    def alive(self) -> bool:
        if self._start_failed.is_set():
            return False
        return not self._started.is_set() or self.service.is_alive()

    def ready(self) -> bool:
        return self._started.is_set() and self.service.is_alive()


def command_registry(service: CommandStatsSource) -> CollectorRegistry:
    """A registry holding only the command path's metrics."""
    registry = CollectorRegistry()
    registry.register(CommandCollector(service))
    return registry


def health_server(host: str, port: int, health: CommandHealth) -> HealthServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` for ``iot-cmd serve`` (not started yet)."""
    return HealthServer(
        host,
        port,
        command_registry(health.service),
        alive=health.alive,
        ready=health.ready,
    )
