"""The Kafka probe and every other Kafka client of the service end with it: none of librdkafka's
threads (``rdk:*``) outlives ``ApiService.stop``, even while the service object is still
referenced (as a test's fixture or a traceback keeps it), and even when ``start`` failed."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections.abc import Iterator

import pytest

from api.config import ApiConfig
from api.operator.app import OperatorHandlers
from api.operator.kafka import CommandPath
from api.plumbing.kafka_health import KafkaHealth
from api.service import ApiService
from kafka_watch import retired


def _rdk_threads() -> int:
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("rdk:")
        except OSError:  # the thread ended meanwhile
            pass
    return count


def _baseline(timeout_s: float = 10.0) -> int:
    """The rdk threads of clients still alive: earlier tests' unreferenced clients are freed
    first (collected, their threads given time to end), or their ending inside a test would
    look like this test's clients ending."""
    gc.collect()
    assert retired.drain(timeout_s)
    deadline = time.monotonic() + timeout_s
    last = _rdk_threads()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = _rdk_threads()
        if now == last:
            return now
        last = now
    return last


def _settles_at(before: int, timeout_s: float = 10.0) -> int:
    """librdkafka's threads of a freed client end within moments: wait for them."""
    deadline = time.monotonic() + timeout_s
    while (now := _rdk_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    return now


@pytest.fixture
def dead_kafka() -> Iterator[str]:
    """An address where nothing listens: every client keeps trying to connect (and logging
    it) for as long as it lives."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_the_probe_client_is_freed_by_close(dead_kafka: str) -> None:
    before = _baseline()

    async def life() -> KafkaHealth:
        health = KafkaHealth(dead_kafka, interval_s=0.1, timeout_s=0.5)
        health.start()
        await asyncio.sleep(0.3)  # a probe in flight when close comes
        assert _rdk_threads() > before
        await health.close()
        return health

    health = asyncio.run(life())  # still referenced here
    assert health is not None
    assert _settles_at(before) == before


def _service(bootstrap: str, port: int = 0) -> ApiService:
    return ApiService(
        ApiConfig.load(
            [],
            environ={},
            kafka_bootstrap=bootstrap,
            insecure_anonymous=True,
            api_port=port,
            shutdown_timeout_s=1.0,
        )
    )


def test_no_kafka_client_outlives_stop(dead_kafka: str) -> None:
    before = _baseline()
    service = _service(dead_kafka)

    async def life() -> None:
        await service.start()
        await asyncio.sleep(1.5)  # the probe has run (and failed) at least once
        assert service.health is not None
        assert service.health.renewing._client is not None
        await service.stop()

    asyncio.run(life())
    assert _settles_at(before) == before  # `service` is still referenced


def test_no_kafka_client_outlives_a_failed_start(dead_kafka: str) -> None:
    before = _baseline()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        service = _service(dead_kafka, taken.getsockname()[1])
        with pytest.raises(OSError, match="address already in use"):
            asyncio.run(service.run())
    assert _settles_at(before) == before


def test_the_operator_command_path_is_freed_by_close(dead_kafka: str) -> None:
    """The operator routes' command path holds two producers; they once outlived the service
    as long as its handlers were referenced, reconnecting to a Kafka long stopped."""
    before = _baseline()
    handlers = OperatorHandlers(
        ApiConfig.load([], environ={}, kafka_bootstrap=dead_kafka, insecure_anonymous=True)
    )

    async def life() -> None:
        handlers.path = CommandPath(dead_kafka, "t.commands", "t.status", "t.replies")
        assert _rdk_threads() > before
        await handlers.close()

    asyncio.run(life())
    assert handlers is not None  # still referenced here
    assert _settles_at(before) == before
