"""Kafka for HTTP devices: the bridge's records (with their headers), acks=all, idempotent, a
request resumed only when Kafka acknowledged its record."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from bridge.mapping import KafkaRecord


class DeviceRecordError(Exception):
    """Kafka refused the record or did not acknowledge it in time."""


class DeviceProducer:
    def __init__(self, bootstrap: str, *, linger_ms: int, timeout_ms: int) -> None:
        self._settings = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,  # per device, records stay in the order produced
            "linger.ms": linger_ms,
            "message.timeout.ms": timeout_ms,
            "client.id": "iot-api-devices",
        }
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        self._producer = Producer(self._settings)
        self._thread = threading.Thread(target=self._serve, name="api-devices", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        assert self._producer is not None
        while not self._stop.is_set():
            self._producer.poll(0.05)

    async def produce(self, rec: KafkaRecord) -> None:
        """Return once Kafka holds ``rec``; DeviceRecordError if it refused or timed out."""
        assert self._producer is not None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str | None] = loop.create_future()

        def settle(result: str | None) -> None:
            if not done.done():
                done.set_result(result)

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            loop.call_soon_threadsafe(settle, None if err is None else err.str())

        headers: list[tuple[str, str | bytes | None]] = list(rec.headers)
        while True:
            try:
                self._producer.produce(
                    rec.topic, rec.value, rec.key, on_delivery=on_delivery, headers=headers
                )
                break
            except BufferError:
                await asyncio.sleep(0.005)  # the local queue is full: Kafka is behind
            except KafkaException as exc:
                raise DeviceRecordError(str(exc)) from exc
        error = await done
        if error is not None:
            raise DeviceRecordError(error)

    def close(self, timeout_s: float) -> None:
        if self._producer is not None:
            self._producer.flush(timeout_s)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._producer = None
