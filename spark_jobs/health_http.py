"""The streaming job's ``/healthz``, ``/readyz`` and ``/metrics`` (a daemon thread).

``/healthz`` is 200 while the job's loop runs (queries being restarted count as alive: the job
recovers by itself); ``/readyz`` is 200 when every query is active and none is stalled, else
503 with one line per problem; ``/metrics`` is Prometheus text (``iot_analytics_*``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from spark_jobs.query_health import JobHealth


class _JobCollector(Collector):
    def __init__(self, snapshot: Callable[[], JobHealth]) -> None:
        self.snapshot = snapshot

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


class HealthEndpoint:
    """Serves a :class:`JobHealth` snapshot taken under the caller's lock."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], JobHealth]) -> None:
        self.host = host
        self.requested_port = port
        self.snapshot = snapshot
        self.registry = CollectorRegistry()
        self.registry.register(_JobCollector(snapshot))
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                job = outer.snapshot()
                if path == "/metrics":
                    self._reply(200, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = job.running
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"not running\n")
                elif path == "/readyz":
                    if job.ready:
                        self._reply(200, b"ready\n")
                    else:
                        why = "\n".join(job.problems() or ["starting"]) + "\n"
                        self._reply(503, why.encode())
                else:
                    self._reply(404, b"not found: try /metrics, /healthz, /readyz\n")

            def _reply(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((self.host, self.requested_port), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, name="analytics-http", daemon=True
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
