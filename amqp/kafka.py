"""Kafka for AMQP uploads: the bridge's records (with their headers), acks=all, idempotent.

Each record is handed over with a plain int token; its delivery report comes back to the event
loop as ``(token, ok)``: no proton object ever crosses to librdkafka's thread (cffi releases
the GIL around C calls, and a delivery touched there crashed in the contract's measurements).
The reports of one poll reach the loop together: one wake-up per batch, not per record.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from api.plumbing.kafka_producer import PolledProducer
from appconfig.kafka_security import client_base, delivery_timeouts
from bridge.mapping import KafkaRecord

Report = Callable[[int, bool, str], None]
log = logging.getLogger(__name__)


class UploadProducer(PolledProducer):
    def __init__(self, bootstrap: str, *, linger_ms: int, timeout_ms: int, max_bytes: int) -> None:
        settings = {
            **client_base(bootstrap),
            "acks": "all",
            "enable.idempotence": True,  # per device, records stay in the order produced
            "linger.ms": linger_ms,
            **delivery_timeouts(timeout_ms),
            "message.max.bytes": max_bytes + 64 * 1024,  # room for the headers and key
            "client.id": "iot-amqp",
        }
        super().__init__(settings, "amqp-producer")
        self._answers: list[tuple[Report, int, bool, str]] = []  # reports not on the loop yet
        self._answers_lock = threading.Lock()

    def _answer(
        self, loop: asyncio.AbstractEventLoop, report: Report, token: int, ok: bool, error: str
    ) -> None:
        """librdkafka's poll thread: queue a report; only the first of a batch wakes the loop."""
        with self._answers_lock:
            first = not self._answers
            self._answers.append((report, token, ok, error))
        if first:
            loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        """The event loop: run the reports queued so far, each on its own (one failing does
        not keep the others from their answer)."""
        with self._answers_lock:
            batch, self._answers = self._answers, []
        for report, token, ok, error in batch:
            try:
                report(token, ok, error)
            except Exception:
                log.exception("a delivery report failed")

    def send(self, rec: KafkaRecord, token: int, report: Report) -> None:
        """Queue ``rec``; ``report(token, ok, error)`` runs on the event loop once Kafka
        answered (or the producer refused it at once)."""
        assert self._producer is not None
        loop = asyncio.get_running_loop()

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            self._answer(loop, report, token, err is None, "" if err is None else err.str())

        try:
            self._producer.produce(
                rec.topic, rec.value, rec.key, on_delivery=on_delivery, headers=list(rec.headers)
            )
        except BufferError:
            loop.call_soon(report, token, False, "the producer's local queue is full")
        except KafkaException as exc:
            loop.call_soon(report, token, False, str(exc))

    async def publish(self, records: list[KafkaRecord]) -> str | None:
        """Produce ``records`` and wait until Kafka answered for each: None when every one is
        in Kafka, else the first error (queue markers and queue messages: acks=all)."""
        loop = asyncio.get_running_loop()
        left = len(records)
        errors: list[str] = []
        done: asyncio.Future[None] = loop.create_future()

        def report(_token: int, ok: bool, error: str) -> None:
            nonlocal left
            left -= 1
            if not ok:
                errors.append(error)
            if left == 0 and not done.done():
                done.set_result(None)

        if not records:
            return None
        for n, rec in enumerate(records):
            self.send(rec, n, report)
        await done
        return errors[0] if errors else None
