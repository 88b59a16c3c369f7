"""iot-amqp in a thread of the test process (as tests/api/harness.py runs iot-api), on free
ports, with a registry on fresh topics of the session's Kafka."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from amqp.config import AmqpConfig
from amqp.service import AmqpService


@contextmanager
def running_amqp(**settings: Any) -> Iterator[AmqpService]:
    settings.setdefault("amqp_port", 0)
    settings.setdefault("http_port", 0)
    cfg = AmqpConfig.load([], environ={}, **settings)
    service = AmqpService(cfg)
    loop = asyncio.new_event_loop()
    failed: list[BaseException] = []
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(service.start())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failed.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="iot-amqp-test", daemon=True)
    thread.start()
    ready.wait(60)
    if failed:
        raise failed[0]
    try:
        yield service
    finally:
        asyncio.run_coroutine_threadsafe(service.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
