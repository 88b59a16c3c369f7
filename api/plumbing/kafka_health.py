"""Is Kafka there? A probe every second (a metadata request); after two failed probes in a row
the service answers Kafka-bound requests 503 at once instead of letting each wait out its own
timeout, and serves them again from the first success. ``/readyz`` answers from the same probe.

A probe that times out is tried once more on a fresh client (issue 33, ``Renewing.call``'s
``fresh_retry``): a long-lived client kept asking the silent node of a 3-node cluster (a lost
host, a hung process) and the service said "Kafka does not answer" while two nodes served."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from api.plumbing.kafka_renew import Renewing
from appconfig.kafka_security import client_base
from kafka_watch import retired

log = logging.getLogger(__name__)


class KafkaHealth:
    def __init__(
        self,
        bootstrap: str,
        *,
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        failures: int = 2,
        renew_gap_s: float = 3.0,
    ) -> None:
        self.renewing: Renewing[AdminClient] = Renewing(
            "api-probe",
            lambda: AdminClient(
                {
                    **client_base(bootstrap),
                    "client.id": "iot-api-probe",
                    "log.connection.close": False,
                }
            ),
            failures=1,
            min_gap_s=renew_gap_s,  # a Kafka really down costs one new client per gap
        )
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._failures = failures
        self._failed = 0
        self._answered = False  # some probe has succeeded since start
        self._first = asyncio.Event()  # the first probe's verdict is in
        self._task: asyncio.Task[None] | None = None
        self._probing: asyncio.Future[None] | None = None  # the probe thread in flight

    @property
    def up(self) -> bool:
        """Serve Kafka-bound requests (optimistic until two probes failed in a row)."""
        return self._failed < self._failures

    async def ready(self) -> bool:
        """For ``/readyz``: Kafka has answered, and not failed two probes in a row since (a
        request before the first verdict waits for it)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first.wait(), 2 * self._timeout_s + 1)
        return self._answered and self.up

    def _probe(self) -> None:
        self.renewing.call(
            lambda client: client.list_topics(timeout=self._timeout_s), fresh_retry=True
        )

    async def _watch(self) -> None:
        while True:
            try:
                # shielded: a cancel (close) must not orphan the thread holding the client
                self._probing = asyncio.ensure_future(asyncio.to_thread(self._probe))
                await asyncio.shield(self._probing)
            except KafkaException as exc:
                self._failed += 1
                if self._failed == self._failures:
                    log.warning("Kafka does not answer (%s): Kafka requests get 503", exc)
            else:
                if not self.up:
                    log.info("Kafka answers again")
                self._failed = 0
                self._answered = True
            self._first.set()
            await asyncio.sleep(self._interval_s)

    def start(self) -> None:
        self.renewing.start()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        """Stop probing and free the client. AdminClient has no close(): librdkafka frees it
        (and stops reconnecting) only once nothing refers to it, and the service object may be
        kept long after stop (a test's fixture, a traceback); so drop our reference, after the
        probe in flight (at most twice ``timeout_s``) has let go of it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._probing is not None:
            await asyncio.wait({self._probing})
            if not self._probing.cancelled():
                self._probing.exception()  # retrieved: a last failed probe is no news at stop
            self._probing = None
        self.renewing.close()
        await asyncio.to_thread(retired.drain, 10.0)
