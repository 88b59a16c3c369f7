"""Keeps the continuous streaming job's queries running (used by :mod:`spark_jobs.stream`).

A query that terminated with an error (Kafka away: ``STREAM_FAILED``) is started again by the
same builder, so from the same checkpoint, after a backoff; the other queries go on. Every
``check_interval_s`` the checkpoints' committed offsets are compared with Kafka's end offsets
to flag stalled queries. The :class:`JobHealth` it keeps is what ``/readyz`` and ``/metrics``
show.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from spark_jobs.config import AnalyticsConfig
from spark_jobs.kafka_offsets import end_offsets
from spark_jobs.query_health import HealthSettings, JobHealth, committed_offsets

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


_PY_ERROR = re.compile(r"^[\w.]+(Error|Exception): ")


def _short(error: object) -> str:
    """The line of a (JVM or Python) error that says what failed, without the stack."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if "Traceback" in lines[0]:
        # a Python error raised in a foreachBatch function: its last `XError: ...` line
        found = [line for line in lines if _PY_ERROR.match(line)]
        if found:
            return found[-1][:300]
    return lines[0][:300]


class QuerySupervisor:
    """Keeps the continuous job's queries running: restart from checkpoint with backoff."""

    def __init__(
        self,
        cfg: AnalyticsConfig,
        builders: dict[str, Callable[[], StreamingQuery]],
        settings: HealthSettings,
        executors: Callable[[], int | None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.builders = builders
        self.settings = settings
        self.executors = executors  # the driver's executor count (None: local mode)
        self.queries: dict[str, StreamingQuery | None] = dict.fromkeys(builders)
        self.health = JobHealth()
        self.lock = threading.Lock()
        self._next_check = 0.0

    def snapshot(self) -> JobHealth:
        with self.lock:
            return copy.deepcopy(self.health)

    def run(self, stop: threading.Event) -> None:
        for name in self.builders:
            self._start(name)
        with self.lock:
            self.health.running = True
        # the first batch takes a while anyway; the first check comes one interval later
        self._next_check = time.time() + self.settings.check_interval_s
        try:
            while not stop.is_set():
                self._watch()
                if time.time() >= self._next_check:
                    self._check()
                    self._next_check = time.time() + self.settings.check_interval_s
                stop.wait(1.0)
        finally:
            with self.lock:
                self.health.running = False

    def stop_all(self) -> None:
        for q in self.queries.values():
            if q is not None and q.isActive:
                q.stop()

    def _watch(self) -> None:
        now = time.time()
        for name in self.builders:
            query = self.queries[name]
            if query is not None and not query.isActive:
                error = query.exception()
                reason = _short(error) if error is not None else "stopped without an error"
                with self.lock:
                    rec = self.health.query(name)
                    delay = rec.failed(reason, now, self.settings)
                    restart = rec.restarts + 1
                log.error(
                    "query %s failed: %s; restart %d from its checkpoint in %.0f s",
                    name, reason, restart, delay,
                )  # fmt: skip
                self.queries[name] = None
            if self.queries[name] is None:
                with self.lock:
                    due = (self.health.query(name).next_start_at or 0) <= now
                if due:
                    self._start(name, restart=True)

    def _start(self, name: str, restart: bool = False) -> None:
        now = time.time()
        try:
            query = self.builders[name]()
        except Exception as exc:  # noqa: BLE001 - any start failure is retried, not fatal
            with self.lock:
                rec = self.health.query(name)
                if restart:
                    rec.restarts += 1
                delay = rec.failed(_short(exc), now, self.settings)
            log.error("query %s did not start: %s; next try in %.0f s", name, _short(exc), delay)
            return
        self.queries[name] = query
        with self.lock:
            rec = self.health.query(name)
            if restart:
                rec.restarts += 1
            rec.started(now)
        if restart:
            log.warning("query %s restarted from its checkpoint (restart %d)", name, rec.restarts)

    def _executors(self) -> int | None:
        if self.executors is None:
            return None
        try:
            return self.executors()
        except Exception as exc:  # noqa: BLE001 - a failed look-up is "unknown", never fatal
            log.debug("executor count unavailable: %s", exc)
            return None

    def _check(self) -> None:
        committed = {
            name: committed_offsets(self.cfg.checkpoint_path(name)) for name in self.builders
        }
        # the tenants' topics the queries read (by pattern) are named in their checkpoints
        tenant_topics = {t for offsets in committed.values() for t in offsets or {}}
        kafka_end = end_offsets(
            self.cfg.kafka_bootstrap,
            [self.cfg.topic_telemetry, self.cfg.topic_presence],
            optional=tenant_topics,
        )
        executors = self._executors()
        now = time.time()
        with self.lock:
            self.health.kafka_reachable = kafka_end is not None
            if self.health.observe_executors(executors, now):
                if executors == 0:
                    log.warning(
                        "no executors on %s: no live Spark worker runs this job; the queries "
                        "wait without an error until one does",
                        self.cfg.spark_master,
                    )
                else:
                    log.info("%s executor(s) again on %s", executors, self.cfg.spark_master)
            for name, offsets in committed.items():
                rec = self.health.query(name)
                was = rec.stalled
                rec.observe(offsets, kafka_end, now, self.settings.stall_after_s)
                if rec.stalled and not was:
                    log.warning(
                        "query %s stalled: %s records in Kafka, nothing committed for %.0f s",
                        name, rec.backlog, now - (rec.committed_changed_at or now),
                    )  # fmt: skip
                elif was and not rec.stalled:
                    log.info("query %s progresses again", name)
