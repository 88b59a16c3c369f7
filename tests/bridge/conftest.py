"""Fixtures of the bridge's unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from bridge.config import BridgeConfig
from bridge.service import TelemetryBridge
from tests.bridge.fakes import FakeProducer, FakeSubscriber


@pytest.fixture
def rig() -> Iterator[tuple[TelemetryBridge, FakeProducer, FakeSubscriber]]:
    loop = asyncio.new_event_loop()
    bridge = TelemetryBridge(
        BridgeConfig(pending_max_messages=5, max_payload_bytes=100, pending_max_bytes=1000)
    )
    producer, sub = FakeProducer(), FakeSubscriber()
    bridge._producer = producer
    bridge.subscriber = sub  # type: ignore[assignment]
    bridge._loop = loop
    yield bridge, producer, sub
    loop.close()
