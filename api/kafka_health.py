"""Is Kafka there? A probe every second (a metadata request); after two failures in a row the
service answers Kafka-bound requests 503 at once instead of letting each wait out its own
timeout, and serves them again from the first success."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)


class KafkaHealth:
    def __init__(
        self, bootstrap: str, *, interval_s: float = 1.0, timeout_s: float = 2.0, failures: int = 2
    ) -> None:
        self._client = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "iot-api-probe",
                "log.connection.close": False,
            }
        )
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._failures = failures
        self._failed = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self._failed < self._failures

    def _probe(self) -> None:
        self._client.list_topics(timeout=self._timeout_s)

    async def _watch(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self._probe)
            except KafkaException as exc:
                self._failed += 1
                if self._failed == self._failures:
                    log.warning("Kafka does not answer (%s): Kafka requests get 503", exc)
            else:
                if not self.up:
                    log.info("Kafka answers again")
                self._failed = 0
            await asyncio.sleep(self._interval_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
