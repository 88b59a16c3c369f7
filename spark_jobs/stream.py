"""The streaming job: Kafka -> parse -> transforms -> Delta tables (extract, transform, load).

One SparkSession runs five queries, each with its own checkpoint under ``checkpoint_dir``:

| query | source | transform | sink |
|---|---|---|---|
| device_minute | telemetry | watermark, :func:`transforms.device_minute` | Delta, MERGE (update) |
| fleet_minute | telemetry | watermark, :func:`transforms.fleet_minute` | Delta, MERGE (update) |
| anomalies | telemetry | :func:`anomaly.anomalies` (state per device) | Delta, append |
| device_status | telemetry + presence | :func:`transforms.device_facts` | Delta, overwritten |
| rejects | telemetry | :func:`transforms.rejects` | Delta, append |

Tenants: the sources are the telemetry and presence topics and every tenant's copy of them
(``iot.{tenant}.telemetry``, by pattern: :mod:`spark_jobs.tenants`); every row carries its
``tenant``, a device is (tenant, device_id), and every table is partitioned by tenant.

Exactly-once: Kafka offsets are recorded in the checkpoint before a batch runs and every
write commits to the table's Delta log with the query's id and the batch id as its
transaction (``txnAppId``/``txnVersion``), so a batch replayed after a crash is skipped, never
added twice. The windowed tables run in update mode: each batch MERGEs the windows it changed
by key, so a late reading (inside the watermark) updates its minute's row in place; the
append tables append each batch, device_status overwrites itself (see
:mod:`spark_jobs.delta_writes`). Each query compacts and vacuums its own table every
``delta_upkeep_interval_s``, after a batch. Every write to the warehouse happens in this job's
driver.

Recovery: run continuously, the job outlives its queries. A query that fails (Kafka away:
``STREAM_FAILED``) is started again from its checkpoint after a backoff (2, 4, 8 ... 60 s),
the others go on; the same checkpoint makes the replay exactly-once. With
``IOT_ANALYTICS_HTTP_PORT`` set the job serves ``/healthz``, ``/readyz`` and ``/metrics``,
where a stalled query (records waiting in Kafka, nothing committed for
``IOT_ANALYTICS_STALL_AFTER`` s) shows, and on a cluster a job left without executors (see
:mod:`spark_jobs.query_health`).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from appconfig import kafka_security
from spark_jobs import delta_writes, schemas, tenants, transforms
from spark_jobs.anomaly import AnomalyRule, anomalies
from spark_jobs.config import AnalyticsConfig
from spark_jobs.health_http import HealthEndpoint
from spark_jobs.migrate import migrate_warehouse
from spark_jobs.query_health import HealthSettings
from spark_jobs.query_supervisor import QuerySupervisor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

PROGRESS_DIR = "_progress"
PROGRESS_MAX_BYTES = 5_000_000  # then <query>.jsonl becomes <query>.jsonl.1 (one generation kept)


# --- extract ---------------------------------------------------------------------------------


def _subscription(cfg: AnalyticsConfig, topic: str) -> tuple[str, str]:
    """The topic alone, or (``tenant_topics``) it and every tenant's copy, new ones included:
    Spark lists the topics matching the pattern at every trigger and reads a new one from its
    start."""
    if cfg.tenant_topics:
        return "subscribePattern", tenants.topic_pattern(topic)
    return "subscribe", topic


def kafka_source(spark: SparkSession, cfg: AnalyticsConfig, topic: str) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cfg.kafka_bootstrap)
        .options(**kafka_security.spark_options(kafka_security.client_defaults()))
        .option(*_subscription(cfg, topic))
        .option("startingOffsets", cfg.starting_offsets)
        .option("failOnDataLoss", str(cfg.fail_on_data_loss).lower())
        .option("includeHeaders", "true")
    )
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    return reader.load()


# --- transform + load ------------------------------------------------------------------------


def _trigger(writer: Any, cfg: AnalyticsConfig, available_now: bool) -> Any:
    if available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=cfg.trigger_interval)


def _batch_query(
    df: DataFrame,
    cfg: AnalyticsConfig,
    name: str,
    mode: str,
    write: Callable[[DataFrame, Path, str, int], None],
    *,
    upkeep: delta_writes.Upkeep,
    available_now: bool,
) -> StreamingQuery:
    """A foreachBatch query calling ``write(batch, table, txn app id, batch id)``, then, when
    due, the table's upkeep (in the query's own thread: never beside its own writes)."""
    table = cfg.table_path(name)
    checkpoint = cfg.checkpoint_path(name)

    def each(batch: DataFrame, batch_id: int) -> None:
        write(batch, table, delta_writes.app_id(name, checkpoint), batch_id)
        upkeep.after_batch(batch.sparkSession, table)

    writer = (
        df.writeStream.queryName(name)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint.resolve()))
        .foreachBatch(each)
    )
    return _trigger(writer, cfg, available_now).start()


def query_builders(
    spark: SparkSession, cfg: AnalyticsConfig, *, available_now: bool
) -> dict[str, Callable[[], StreamingQuery]]:
    """Name -> a function starting that query (from its checkpoint, when it has one)."""
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

    cfg.warehouse_dir.mkdir(parents=True, exist_ok=True)
    cfg.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    metrics = list(cfg.metrics)

    def telemetry() -> DataFrame:
        return transforms.parse_telemetry(kafka_source(spark, cfg, cfg.topic_telemetry))

    def windowed() -> DataFrame:
        valid = transforms.valid_telemetry(telemetry())
        return valid.withWatermark("event_time", cfg.watermark)

    upkeep = delta_writes.Upkeep(
        cfg.delta_upkeep_interval_s,
        cfg.delta_retention_hours,
        zorder={schemas.DEVICE_MINUTE: ("device_id",), schemas.ANOMALIES: ("device_id",)},
        rows=cfg.retention_policy(),
        max_files_per_day=cfg.delta_max_files_per_day,
    )

    def append(name: str, frame: Callable[[], DataFrame]) -> Callable[[], StreamingQuery]:
        write = delta_writes.append_batch
        return lambda: _batch_query(
            frame(), cfg, name, "append", write, upkeep=upkeep, available_now=available_now
        )

    def merged(
        name: str, keys: list[str], frame: Callable[[], DataFrame]
    ) -> Callable[[], StreamingQuery]:
        def write(batch: DataFrame, table: Path, app: str, batch_id: int) -> None:
            delta_writes.merge_batch(batch, table, keys, app, batch_id)

        return lambda: _batch_query(
            frame(), cfg, name, "update", write, upkeep=upkeep, available_now=available_now
        )

    silence = cfg.silence_s

    def publish(batch: DataFrame, table: Path, app: str, batch_id: int) -> None:
        status = transforms.device_status(batch, F.current_timestamp(), silence)
        delta_writes.overwrite_batch(status, table, app, batch_id)

    def device_status() -> StreamingQuery:
        facts = transforms.device_facts(
            transforms.valid_telemetry(telemetry()),
            transforms.parse_presence(kafka_source(spark, cfg, cfg.topic_presence)),
        )
        name = schemas.DEVICE_STATUS
        return _batch_query(
            facts, cfg, name, "complete", publish, upkeep=upkeep, available_now=available_now
        )

    tenant = tenants.TENANT_COLUMN
    every = {
        schemas.DEVICE_MINUTE: merged(
            schemas.DEVICE_MINUTE,
            [tenant, "device_id", "window_start"],
            lambda: transforms.device_minute(windowed(), metrics),
        ),
        schemas.FLEET_MINUTE: merged(
            schemas.FLEET_MINUTE,
            [tenant, "window_start"],
            lambda: transforms.fleet_minute(windowed(), metrics),
        ),
        schemas.ANOMALIES: append(
            schemas.ANOMALIES,
            lambda: anomalies(
                transforms.valid_telemetry(telemetry()), metrics, AnomalyRule.from_config(cfg)
            ),
        ),
        schemas.REJECTS: append(schemas.REJECTS, lambda: transforms.rejects(telemetry())),
        schemas.DEVICE_STATUS: device_status,
    }
    return {name: start for name, start in every.items() if name in cfg.tables}


def start_queries(
    spark: SparkSession, cfg: AnalyticsConfig, *, available_now: bool
) -> list[StreamingQuery]:
    """Start the job's queries (one per table of ``cfg.tables``); returns them running."""
    return [start() for start in query_builders(spark, cfg, available_now=available_now).values()]


# --- progress --------------------------------------------------------------------------------


def progress_summary(progress: dict[str, Any]) -> dict[str, Any]:
    """The few numbers of a StreamingQueryProgress worth logging and keeping."""
    state = progress.get("stateOperators") or []
    sink = progress.get("sink") or {}
    return {
        "query": progress.get("name"),
        "batch": progress.get("batchId"),
        "timestamp": progress.get("timestamp"),
        "input_rows": progress.get("numInputRows", 0),
        "input_rows_per_s": progress.get("inputRowsPerSecond"),
        "processed_rows_per_s": progress.get("processedRowsPerSecond"),
        "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "dropped_by_watermark": sum(int(s.get("numRowsDroppedByWatermark", 0)) for s in state),
        "state_rows": sum(int(s.get("numRowsTotal", 0)) for s in state),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "sink_rows": sink.get("numOutputRows"),
    }


def _listener(progress_dir: Path) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLog(StreamingQueryListener):
        """Logs each batch and appends it to ``<warehouse>/_progress/<query>.jsonl``."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's API)
            log.info("query %s started (id %s)", event.name, event.id)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            summary = progress_summary(json.loads(event.progress.json))
            if summary["input_rows"] or summary["dropped_by_watermark"]:
                log.info("progress %s", json.dumps(summary))
            with self._lock:
                progress_dir.mkdir(parents=True, exist_ok=True)
                path = progress_dir / f"{summary['query']}.jsonl"
                if path.exists() and path.stat().st_size > PROGRESS_MAX_BYTES:
                    path.replace(path.with_name(path.name + ".1"))
                with path.open("a") as f:
                    f.write(json.dumps(summary) + "\n")

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            return

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            if event.exception:
                log.error("query %s failed: %s", event.id, event.exception)
            else:
                log.info("query %s stopped", event.id)

    return ProgressLog()


# --- main ------------------------------------------------------------------------------------


def _run_until_drained(session: SparkSession, queries: list[StreamingQuery]) -> int:
    """The ``available_now`` run: until every query drained Kafka; 1 when one failed."""
    # awaitAnyTermination raises for any query of the session that failed since the last reset,
    # also one from before this run (a shared session): only these queries count here.
    session.streams.resetTerminated()
    while True:
        if all(not q.isActive for q in queries):
            break
        if any(q.exception() is not None for q in queries if not q.isActive):
            break
        session.streams.awaitAnyTermination(1)
        session.streams.resetTerminated()
    failed = [q for q in queries if not q.isActive and q.exception() is not None]
    for q in failed:
        log.error("query %s failed: %s", q.name, q.exception())
    return 1 if failed else 0


def run(
    cfg: AnalyticsConfig,
    *,
    available_now: bool = False,
    spark: SparkSession | None = None,
    stop: threading.Event | None = None,
    health: HealthSettings | None = None,
) -> int:
    """Run the job: until every query drained Kafka (``available_now``), or until stopped.

    ``available_now`` returns 0 when every query ended cleanly, 1 when one failed. Run
    continuously, a failed query is restarted from its checkpoint with backoff and the job
    returns 0 when stopped. ``health`` defaults to the ``IOT_ANALYTICS_*`` environment.
    """
    from spark_jobs.session import build_session, executor_count

    settings = health or HealthSettings.from_env()
    stop = stop or threading.Event()
    supervised: QuerySupervisor | None = None
    endpoint: HealthEndpoint | None = None
    session = spark or build_session(cfg, "iot-analytics-stream")
    listener = _listener(cfg.warehouse_dir / PROGRESS_DIR)
    session.streams.addListener(listener)
    queries: list[StreamingQuery] = []
    try:
        migrated = migrate_warehouse(session, cfg.warehouse_dir)
        if migrated:
            log.info("migrated to Delta tables: %s", ", ".join(migrated))
        if fed := delta_writes.enable_change_feed(session, cfg.warehouse_dir):
            log.info("change data feed turned on: %s", ", ".join(fed))
        builders = query_builders(session, cfg, available_now=available_now)
        log.info(
            "streaming %s from %s into %s (%s)",
            cfg.topic_telemetry,
            cfg.kafka_bootstrap,
            cfg.warehouse_dir,
            "available-now" if available_now else f"every {cfg.trigger_interval}",
        )
        if available_now:
            queries = [start() for start in builders.values()]
            return _run_until_drained(session, queries)
        supervised = QuerySupervisor(
            cfg, builders, settings, executors=lambda: executor_count(session)
        )
        supervised.health.spark_master = session.sparkContext.master or ""
        supervised.health.spark_ui = session.sparkContext.uiWebUrl or ""
        if settings.http_port is not None:
            endpoint = HealthEndpoint(
                settings.http_host,
                settings.http_port,
                supervised.snapshot,
                table_files=lambda: delta_writes.table_files(cfg.warehouse_dir),
                max_files_per_day=cfg.delta_max_files_per_day,
            )
            endpoint.start()
            log.info("health and metrics on http://%s:%d/", settings.http_host, endpoint.port)
        supervised.run(stop)
        return 0
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        if supervised is not None:
            supervised.stop_all()
        if endpoint is not None:
            endpoint.stop()
        if spark is None:
            session.stop()  # stops the listener bus before this process's callback server
        else:
            session.streams.removeListener(listener)


def install_stop_signals(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set ``stop``: the queries are stopped between batches, cleanly."""

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping the queries", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
