"""Kafka publish for the HTTP door: acks=all, idempotent, each request awaits its records.

One confluent-kafka producer per process; a thread serves its delivery reports and hands each
to the event loop, so a request resumes when Kafka acknowledged (or refused) all its records.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from api.plumbing.framing import Record
from appconfig.kafka_security import client_base, delivery_timeouts

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    acked: int
    error: str | None  # the first failure, None when every record was acknowledged


class PolledProducer:
    """A confluent-kafka producer whose delivery reports a thread of its own serves."""

    def __init__(self, settings: dict[str, Any], thread_name: str) -> None:
        self._settings = settings
        self._thread_name = thread_name
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        self._producer = Producer(self._settings)
        self._thread = threading.Thread(target=self._serve, name=self._thread_name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        assert self._producer is not None
        while not self._stop.is_set():
            self._producer.poll(0.05)

    async def _produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        on_delivery: Callable[[KafkaError | None, Any], None],
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        """Queue one record, waiting while the local queue is full; KafkaException if refused."""
        assert self._producer is not None
        while True:
            try:
                if headers is None:
                    self._producer.produce(topic, value, key, on_delivery=on_delivery)
                else:
                    self._producer.produce(
                        topic, value, key, on_delivery=on_delivery, headers=headers
                    )
                return
            except BufferError:
                await asyncio.sleep(0.005)  # the local queue is full: Kafka is behind

    def close(self, timeout_s: float) -> None:
        if self._producer is not None:
            self._producer.flush(timeout_s)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._producer = None  # freed: no reconnect attempts after the service stopped


class KafkaPublisher(PolledProducer):
    def __init__(self, bootstrap: str, *, linger_ms: int, timeout_ms: int, max_bytes: int) -> None:
        settings = {
            **client_base(bootstrap),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            **delivery_timeouts(timeout_ms),
            "message.max.bytes": max_bytes + 64 * 1024,  # room for a record's headers and key
            "compression.type": "lz4",
            "client.id": "iot-api",
        }
        super().__init__(settings, "api-producer")

    async def publish(self, topic: str, records: list[Record]) -> PublishOutcome:
        """Produce every record; return when Kafka has answered for each of them."""
        assert self._producer is not None
        if not records:
            return PublishOutcome(0, None)
        tally = _Tally(asyncio.get_running_loop(), len(records))
        produce, on_delivery = self._producer.produce, tally.on_delivery
        for index, (key, value) in enumerate(records):
            try:
                try:  # no coroutine per record: one await only when the local queue is full
                    produce(topic, value, key, on_delivery=on_delivery)
                except BufferError:
                    await self._produce(topic, value, key, on_delivery)
            except KafkaException as exc:
                # not queued: the rest are not sent; wait for those already queued
                tally.abandon(len(records) - index, str(exc))
                break
        await tally.done
        return tally.outcome()


class _Tally:
    """Delivery reports of one request (counted on librdkafka's thread, one wake-up at the end)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self._loop = loop
        self._left = count
        self._lock = threading.Lock()
        self.acked = 0
        self.error: str | None = None
        self.done: asyncio.Future[None] = loop.create_future()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked += 1
            elif self.error is None:
                self.error = err.str()
            self._left -= 1
            last = self._left == 0
        if last:
            self._loop.call_soon_threadsafe(self._finish)

    def abandon(self, count: int, error: str) -> None:
        with self._lock:
            self.error = self.error or error
            self._left -= count
            last = self._left == 0
        if last:
            self._finish()

    def outcome(self) -> PublishOutcome:
        return PublishOutcome(self.acked, self.error)
