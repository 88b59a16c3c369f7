"""Kafka for AMQP uploads: the bridge's records (with their headers), acks=all, idempotent.

Each record is handed over with a plain int token; its delivery report comes back to the event
loop as ``(token, ok)``: no proton object ever crosses to librdkafka's thread (cffi releases
the GIL around C calls, and a delivery touched there crashed in the contract's measurements).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from api.plumbing.kafka_producer import PolledProducer
from appconfig.kafka_security import client_base, delivery_timeouts
from bridge.mapping import KafkaRecord

Report = Callable[[int, bool, str], None]


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

    def send(self, rec: KafkaRecord, token: int, report: Report) -> None:
        """Queue ``rec``; ``report(token, ok, error)`` runs on the event loop once Kafka
        answered (or the producer refused it at once)."""
        assert self._producer is not None
        loop = asyncio.get_running_loop()

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            loop.call_soon_threadsafe(report, token, err is None, "" if err is None else err.str())

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
