"""Kafka for HTTP devices: the bridge's records (with their headers), acks=all, idempotent, a
request resumed only when Kafka acknowledged its record."""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from api.plumbing.kafka_producer import PolledProducer
from appconfig.kafka_security import client_base, delivery_timeouts
from bridge.mapping import KafkaRecord


class DeviceRecordError(Exception):
    """Kafka refused the record or did not acknowledge it in time."""


class DeviceProducer(PolledProducer):
    def __init__(self, bootstrap: str, *, linger_ms: int, timeout_ms: int) -> None:
        settings = {
            **client_base(bootstrap),
            "acks": "all",
            "enable.idempotence": True,  # per device, records stay in the order produced
            "linger.ms": linger_ms,
            **delivery_timeouts(timeout_ms),
            "client.id": "iot-api-devices",
        }
        super().__init__(settings, "api-devices")

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

        try:
            await self._produce(rec.topic, rec.value, rec.key, on_delivery, list(rec.headers))
        except KafkaException as exc:
            raise DeviceRecordError(str(exc)) from exc
        error = await done
        if error is not None:
            raise DeviceRecordError(error)
