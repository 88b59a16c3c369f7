"""The streaming job's health, as plain logic: restart backoff, progress, stalls.

The job (:mod:`spark_jobs.stream`) restarts a failed query from its checkpoint after a
backoff instead of dying (a Kafka outage fails the Kafka source with ``STREAM_FAILED``), and
reports each query on ``/readyz`` and ``/metrics``. A query is **stalled** when Kafka holds
records past what the query committed and its committed offsets have not moved for
``stall_after_s``: it runs, but makes no progress (no executor left, stuck fetching offsets).

What a query committed is read from its checkpoint (``offsets/<batch>`` of the newest batch in
``commits/``), the record Spark itself restarts from, so the check needs no listener events.
Settings come from ``IOT_ANALYTICS_*`` environment variables (see :class:`HealthSettings`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.errors import ConfigError

Offsets = dict[str, dict[str, int]]  # topic -> partition -> next offset to read


@dataclass(frozen=True)
class HealthSettings:
    """How the job recovers and reports; every field has an ``IOT_ANALYTICS_*`` variable."""

    http_host: str = "127.0.0.1"
    http_port: int | None = None  # None: no health endpoint (tests, `--available-now`)
    restart_initial_s: float = 2.0
    restart_max_s: float = 60.0
    stable_s: float = 300.0  # a query up this long starts its backoff over
    stall_after_s: float = 180.0  # > the first batch on a loaded 2-core box (~55 s measured)
    check_interval_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.restart_initial_s <= self.restart_max_s:
            raise ConfigError("need 0 < restart_initial_s <= restart_max_s")
        if self.stall_after_s <= 0 or self.check_interval_s <= 0:
            raise ConfigError("stall_after_s and check_interval_s must be > 0")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HealthSettings:
        environ = os.environ if env is None else env

        def num(name: str, default: float) -> float:
            raw = environ.get(name, "")
            try:
                return float(raw) if raw else default
            except ValueError as exc:
                raise ConfigError(f"{name}={raw!r} is not a number") from exc

        port = environ.get("IOT_ANALYTICS_HTTP_PORT", "")
        return cls(
            http_host=environ.get("IOT_ANALYTICS_HTTP_HOST", "") or cls.http_host,
            http_port=int(num("IOT_ANALYTICS_HTTP_PORT", 0)) if port else None,
            restart_initial_s=num("IOT_ANALYTICS_RESTART_BACKOFF_INITIAL", cls.restart_initial_s),
            restart_max_s=num("IOT_ANALYTICS_RESTART_BACKOFF_MAX", cls.restart_max_s),
            stable_s=num("IOT_ANALYTICS_RESTART_STABLE", cls.stable_s),
            stall_after_s=num("IOT_ANALYTICS_STALL_AFTER", cls.stall_after_s),
            check_interval_s=num("IOT_ANALYTICS_HEALTH_INTERVAL", cls.check_interval_s),
        )

    def backoff(self, failures_in_row: int) -> float:
        """Seconds before restart number ``failures_in_row`` (1 = first): doubling, capped."""
        return min(self.restart_initial_s * 2 ** (max(failures_in_row, 1) - 1), self.restart_max_s)


def committed_offsets(checkpoint: Path) -> Offsets | None:
    """The source offsets of the newest committed batch of a query's checkpoint, or None."""
    try:
        batches = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    except OSError:
        return None
    if not batches:
        return None
    try:
        lines = (checkpoint / "offsets" / str(max(batches))).read_text().splitlines()
    except OSError:
        return None
    found: Offsets = {}
    # "v1", the batch metadata, then one line per source: {"topic": {"0": 12, ...}}
    for line in lines[2:]:
        try:
            source = json.loads(line)
        except ValueError:
            continue
        if isinstance(source, dict):
            for topic, parts in source.items():
                if isinstance(parts, dict):
                    found[str(topic)] = {str(p): int(o) for p, o in parts.items()}
    return found


def backlog(committed: Offsets | None, kafka_end: Offsets) -> int | None:
    """Records in Kafka past what the query committed (None when either is unknown)."""
    if committed is None or not committed:
        return None
    total = 0
    for topic, parts in committed.items():
        ends = kafka_end.get(topic)
        if ends is None:
            return None
        total += sum(max(end - parts.get(p, 0), 0) for p, end in ends.items())
    return total


@dataclass
class QueryHealth:
    """One query as the job sees it between checks."""

    name: str
    active: bool = False
    restarts: int = 0
    streak: int = 0
    started_at: float | None = None
    next_start_at: float | None = None
    last_error: str | None = None
    committed: Offsets | None = None
    committed_changed_at: float | None = None
    backlog: int | None = None
    stalled: bool = False

    def started(self, now: float) -> None:
        self.active, self.started_at, self.next_start_at = True, now, None
        self.committed_changed_at = now  # a (re)started query gets stall_after_s to progress

    def failed(self, error: str, now: float, settings: HealthSettings) -> float:
        """Record a failure; returns the seconds to wait before restarting it."""
        uptime = 0.0 if self.started_at is None else now - self.started_at
        self.streak = 1 if uptime >= settings.stable_s else self.streak + 1
        delay = settings.backoff(self.streak)
        self.active, self.last_error, self.next_start_at = False, error, now + delay
        self.stalled = False
        return delay

    def observe(
        self, committed: Offsets | None, kafka_end: Offsets | None, now: float, stall_s: float
    ) -> None:
        """A periodic check: what the checkpoint says, and what Kafka holds (None: unreachable)."""
        if committed != self.committed:
            self.committed, self.committed_changed_at = committed, now
        if kafka_end is None:
            # Kafka away: nothing to read, so no progress is owed (the source will fail and
            # be restarted, or carry on once Kafka is back)
            self.backlog, self.stalled = None, False
            return
        self.backlog = backlog(committed, kafka_end)
        if committed is None:
            # no batch committed yet: anything in Kafka is owed
            has_data = any(end > 0 for parts in kafka_end.values() for end in parts.values())
            waiting = has_data
        else:
            waiting = bool(self.backlog)
        changed = self.committed_changed_at
        quiet_for = 0.0 if changed is None else now - changed
        self.stalled = self.active and waiting and quiet_for >= stall_s


@dataclass
class JobHealth:
    """Every query of the job; what ``/healthz``, ``/readyz`` and ``/metrics`` show."""

    queries: dict[str, QueryHealth] = field(default_factory=dict)
    running: bool = False  # the job's loop runs (the session is up)
    kafka_reachable: bool | None = None
    # executors registered with the driver (None: local mode, the driver runs the tasks). 0 on
    # a cluster is the silent hang: queries stay active, wait for an executor, never fail.
    executors: int | None = None
    executors_lost_at: float | None = None  # when the count last fell to 0
    spark_master: str = ""
    spark_ui: str = ""  # this application's Spark UI ("" when off)

    def observe_executors(self, count: int | None, now: float) -> bool:
        """Record the executor count; True when it just fell to 0 or rose from it."""
        was_zero = self.executors == 0
        if count == 0 and not was_zero:
            self.executors_lost_at = now
        elif count != 0:
            self.executors_lost_at = None
        self.executors = count
        return was_zero != (count == 0)

    def query(self, name: str) -> QueryHealth:
        return self.queries.setdefault(name, QueryHealth(name))

    @property
    def ready(self) -> bool:
        return (
            self.running
            and self.executors != 0
            and bool(self.queries)
            and all(q.active and not q.stalled for q in self.queries.values())
        )

    def problems(self) -> list[str]:
        """Why the job is not ready, one line per problem, for ``/readyz``'s body."""
        out = []
        if self.executors == 0:
            out.append(
                f"no executors on {self.spark_master}: no live Spark worker has the cores and "
                "memory this job asks for; its queries wait (they do not fail) until one does"
            )
        for q in self.queries.values():
            if not q.active:
                out.append(f"{q.name}: restarting after {q.last_error}")
            elif q.stalled:
                out.append(f"{q.name}: stalled, {q.backlog} records waiting in Kafka")
        return out
