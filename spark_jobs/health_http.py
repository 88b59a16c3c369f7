"""The streaming job's ``/healthz``, ``/readyz`` and ``/metrics`` (a daemon thread).

``/healthz`` is 200 while the job's loop runs (queries being restarted count as alive: the job
recovers by itself); ``/readyz`` is 200 when every query is active and none is stalled, else
503 with one line per problem; ``/metrics`` is Prometheus text (``iot_analytics_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from health.server import HealthServer
from spark_jobs.delta_writes import TableFiles
from spark_jobs.query_health import JobHealth
from spark_jobs.retention import over_bound


class _JobCollector(Collector):
    def __init__(
        self,
        snapshot: Callable[[], JobHealth],
        table_files: Callable[[], Mapping[str, TableFiles]] | None = None,
        max_files_per_day: int = 0,
    ) -> None:
        self.snapshot = snapshot
        self.table_files = table_files
        self.max_files_per_day = max_files_per_day

    def collect(self) -> Iterator[Metric]:
        job = self.snapshot()
        yield GaugeMetricFamily("iot_analytics_up", "1 while the job's loop runs", job.running)
        yield GaugeMetricFamily("iot_analytics_ready", "1 when every query runs", job.ready)
        kafka = GaugeMetricFamily(
            "iot_analytics_kafka_reachable", "1 if the last end-offset check reached Kafka"
        )
        kafka.add_metric([], 1.0 if job.kafka_reachable else 0.0)
        yield kafka
        executors = GaugeMetricFamily(
            "iot_analytics_executors",
            "executors registered with the driver (0 on a cluster: nothing runs the queries; "
            "-1: local mode)",
        )
        executors.add_metric([], float(-1 if job.executors is None else job.executors))
        yield executors
        info = GaugeMetricFamily(
            "iot_analytics_spark_info", "where the job's Spark runs", labels=["master", "ui"]
        )
        info.add_metric([job.spark_master, job.spark_ui], 1.0)
        yield info
        families = {
            "active": GaugeMetricFamily(
                "iot_analytics_query_active", "1 while the query runs", labels=["query"]
            ),
            "stalled": GaugeMetricFamily(
                "iot_analytics_query_stalled",
                "1 while Kafka holds records past its checkpoint and it commits nothing",
                labels=["query"],
            ),
            "restarts": GaugeMetricFamily(
                "iot_analytics_query_restarts",
                "restarts from the checkpoint since the job started",
                labels=["query"],
            ),
            "backlog": GaugeMetricFamily(
                "iot_analytics_query_backlog_records",
                "records in Kafka past the query's last committed batch (-1: unknown)",
                labels=["query"],
            ),
        }
        for q in job.queries.values():
            families["active"].add_metric([q.name], 1.0 if q.active else 0.0)
            families["stalled"].add_metric([q.name], 1.0 if q.stalled else 0.0)
            families["restarts"].add_metric([q.name], float(q.restarts))
            families["backlog"].add_metric([q.name], float(-1 if q.backlog is None else q.backlog))
        yield from families.values()
        if self.table_files is not None:
            live = GaugeMetricFamily(
                "iot_analytics_table_files",
                "data files of the table's current Delta version",
                labels=["table"],
            )
            today = GaugeMetricFamily(
                "iot_analytics_table_files_today",
                "of them, written since 00:00 UTC (compaction keeps it small)",
                labels=["table"],
            )
            over = GaugeMetricFamily(
                "iot_analytics_table_files_over_bound",
                "1 while files_today is past IOT_DELTA_MAX_FILES_PER_DAY (compaction is behind)",
                labels=["table"],
            )
            for name, files in sorted(self.table_files().items()):
                live.add_metric([name], float(files.live))
                today.add_metric([name], float(files.today))
                bound = over_bound(files.today, self.max_files_per_day)
                over.add_metric([name], 1.0 if bound else 0.0)
            yield live
            yield today
            yield over


class HealthEndpoint(HealthServer):
    """Serves a :class:`JobHealth` snapshot taken under the caller's lock."""

    def __init__(
        self,
        host: str,
        port: int,
        snapshot: Callable[[], JobHealth],
        table_files: Callable[[], Mapping[str, TableFiles]] | None = None,
        max_files_per_day: int = 0,
    ) -> None:
        registry = CollectorRegistry()
        registry.register(_JobCollector(snapshot, table_files, max_files_per_day))
        super().__init__(
            host,
            port,
            registry,
            alive=lambda: snapshot().running,
            ready=lambda: snapshot().ready,
            not_alive=lambda: "not running",
            not_ready=lambda: "\n".join(snapshot().problems() or ["starting"]),
            thread_name="analytics-http",
        )
        self.snapshot = snapshot
