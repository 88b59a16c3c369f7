"""The Overview's sampler: every few seconds, the services' health and metrics, Kafka's state
and consumer lag, into a short history that SSE clients receive as it grows."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from api.console.kafka_view import KafkaDownError, KafkaView
from api.console.overview import History, Sample
from api.console.probes import probe_all
from api.console.tailer import Tailer

log = logging.getLogger(__name__)
LAG_EVERY = 5  # samples between two consumer-lag reads (they cost a round of admin calls)
# after Kafka did not answer, the lag is read at every sample for this long: a restarted
# Kafka lists no groups, without an error, until its coordinator knows what it owns
SETTLE_S = 30.0


class Sampler:
    def __init__(
        self,
        services: Mapping[str, str],
        kafka: KafkaView,
        tailer: Tailer,
        period_s: float,
        *,
        http_in: Callable[[], float] = lambda: 0.0,
        sites: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.services = dict(services)
        self.kafka = kafka
        self.tailer = tailer
        self.period_s = period_s
        self.http_in = http_in
        self.sites = sites
        self.history = History()
        self.groups: list[dict[str, Any]] = []
        self.kafka_error = ""
        self.latest: dict[str, Any] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._count = 0
        self._settle_until = 0.0  # monotonic; see SETTLE_S

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except Exception:  # the page shows stale data rather than the sampler dying
                log.exception("console: sampling failed")
            await asyncio.sleep(max(0.1, self.period_s - (time.monotonic() - started)))

    async def sample(self) -> dict[str, Any]:
        probes = await probe_all(self.services)
        kafka_up = await asyncio.to_thread(self.kafka.ping)
        if not kafka_up:  # the lag's reader starts afresh once Kafka is back (librdkafka#5511)
            self._settle_until = time.monotonic() + SETTLE_S
            await asyncio.to_thread(self.kafka.forget_group_offsets)
        # the lag every LAG_EVERY samples, and every sample while the last read failed (so that
        # the page is right again as soon as Kafka, or a replaced admin client, answers),
        # while a group's offsets or a node's listing were refused (after a Kafka restart,
        # until its coordinator has loaded them) and for SETTLE_S after Kafka was away
        partial = any(g.get("error") for g in self.groups) or self.kafka.groups_partial
        settling = time.monotonic() < self._settle_until
        if kafka_up and (self._count % LAG_EVERY == 0 or self.kafka_error or partial or settling):
            try:
                self.groups = await asyncio.to_thread(self.kafka.groups)
                self.kafka_error = ""
            except KafkaDownError as exc:
                self.kafka_error = str(exc)
        if not kafka_up:
            self.kafka_error = "Kafka does not answer"
        self._count += 1
        with self.tailer.lock:
            states = dict(self.tailer.state.final_counts)
        up = {name: ok for name, (ok, _) in probes.items()} | {"kafka": kafka_up}
        sample = Sample(
            at=time.time(),
            up=up,
            metrics={name: m for name, (_, m) in probes.items()},
            command_states=states,
            http_in=self.http_in(),
        )
        point = self.history.add(sample)
        # a full log dir stops Kafka (it exits): the bridge's store_dirs gauges say why
        full = [
            f"{store}: disk full ({free:,.0f} bytes free)"
            for store, free in point["disk_full"].items()
            if store.startswith("kafka")
        ]
        self.latest = {
            "point": point,
            "kafka": {"up": kafka_up, "error": "; ".join(full) or self.kafka_error},
            "groups": [{"group": g["group"], "total_lag": g["total_lag"], "state": g["state"]}
                       | ({"error": g["error"]} if g.get("error") else {}) for g in self.groups],
        }  # fmt: skip
        if self.sites is not None:
            found = self.sites()
            self.latest |= {"sites": found["sites"], "sites_error": found["error"]}
        async with self._changed:
            self._changed.notify_all()
        return self.latest

    async def wait(self, timeout_s: float) -> dict[str, Any]:
        """The next sample (or the latest after ``timeout_s``)."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout_s)
        return self.latest
