"""iot-amqp's Prometheus metrics (adapter: prometheus_client)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from kafka_watch.stall import StallJudge, StallTally

# the long-lived Kafka consumers judged for a stall (issue 32), by kind: a northbound link's
# reader, the command replies' and statuses' followers, a queue link's member
STALL_KINDS = ("north", "replies", "queue")


class AmqpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._judges = {kind: weakref.WeakSet[StallJudge]() for kind in STALL_KINDS}
        self.stalls = {kind: StallTally(kind, partial(list, self._judges[kind]))
                       for kind in STALL_KINDS}  # fmt: skip
        # the registry follower of the log-ins, once started (it counts its own replacements)
        self.registry_follower: Callable[[], StallJudge | None] = lambda: None
        registry.register(StallCollector(self.stalls, self._registry_judge))
        self.connections = Gauge(
            "iot_amqp_connections", "AMQP connections open now", registry=registry
        )
        self.logins = Counter(
            "iot_amqp_logins",
            "SASL log-ins by verdict (ok, refused, unavailable; tls_refused: the TLS handshake)",
            ["verdict"], registry=registry,
        )  # fmt: skip
        self.messages = Counter(
            "iot_amqp_messages",
            "Device uploads by channel and outcome (accepted, released, or the condition of a "
            "rejection)",
            ["channel", "outcome"],
            registry=registry,
        )
        self.refused_links = Counter(
            "iot_amqp_refused_links", "Link attaches refused, by condition", ["condition"],
            registry=registry,
        )  # fmt: skip
        self.presettled_events = Counter(
            "iot_amqp_presettled_events",
            "Events sent pre-settled (at most once; Hono refuses them, iot-amqp counts them)",
            registry=registry,
        )
        self.command_links = Gauge(
            "iot_amqp_command_links", "Devices' command links attached now", registry=registry
        )
        self.commands = Counter(
            "iot_amqp_commands",
            "Commands to devices by outcome (sent, accepted, rejected, released)",
            ["outcome"],
            registry=registry,
        )
        self.north_links = Gauge(
            "iot_amqp_north_links", "Applications' telemetry/event links now", registry=registry
        )
        self.north_messages = Counter(
            "iot_amqp_north_messages",
            "Records sent to applications and their outcomes (sent, accepted, rejected, "
            "released), by channel",
            ["channel", "outcome"],
            registry=registry,
        )
        self.north_commands = Counter(
            "iot_amqp_north_commands",
            "Applications' commands (accepted, released, or the condition of a rejection) and "
            "their replies (reply_sent, reply_dropped)",
            ["outcome"],
            registry=registry,
        )
        self.replies = Counter(
            "iot_amqp_replies",
            "Devices' command replies by outcome (accepted: Mosquitto took it; released)",
            ["outcome"],
            registry=registry,
        )

    def watched(self, kind: str, judge: StallJudge) -> StallTally:
        """``judge``'s consumer, of ``kind``, on /metrics while it lives; its tally (the owner
        counts a replacement in it)."""
        self._judges[kind].add(judge)
        return self.stalls[kind]

    def _registry_judge(self) -> StallJudge | None:
        return self.registry_follower()  # read at each scrape: set once the door starts

    def renewed(self, kind: str) -> None:
        """A consumer of ``kind`` was replaced because it stalled."""
        self.stalls[kind].renewals += 1


class StallCollector(Collector):
    """``iot_amqp_kafka_consumer_renewals_total{consumer}`` and
    ``iot_amqp_kafka_consumer_failing{consumer}``, as iot-api's ``kafka_client`` pair."""

    def __init__(
        self, tallies: dict[str, StallTally], follower: Callable[[], StallJudge | None]
    ) -> None:
        self._tallies = tallies
        self._follower = follower  # the log-ins' registry follower, as kind "registry"

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        renewals = CounterMetricFamily(
            "iot_amqp_kafka_consumer_renewals",
            "Long-lived Kafka consumers replaced because they stalled (records past a position "
            "that did not move for kafka_consumer_stall_s, not paused for want of credit), by "
            "kind (north: northbound links' readers; replies: the command replies' and "
            "statuses' followers; queue: queue links' members; registry: the log-ins' registry "
            "follower)",
            labels=["consumer"],
        )
        failing = GaugeMetricFamily(
            "iot_amqp_kafka_consumer_failing",
            "Partitions behind without progress at the last check, over the consumers of a "
            "kind alive now (0: they read or idle)",
            labels=["consumer"],
        )
        for kind, tally in self._tallies.items():
            renewals.add_metric([kind], tally.renewals)
            failing.add_metric([kind], tally.failures)
        follower = self._follower()
        renewals.add_metric(["registry"], follower.renewals if follower else 0)
        failing.add_metric(["registry"], follower.failures if follower else 0)
        yield renewals
        yield failing
