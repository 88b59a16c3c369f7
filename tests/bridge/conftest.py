"""Fixtures of the bridge's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridge.config import BridgeConfig
from bridge.service import TelemetryBridge
from tests.bridge.fakes import Rig, make_rig


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from make_rig(
        TelemetryBridge(
            BridgeConfig(pending_max_messages=5, max_payload_bytes=100, pending_max_bytes=1000)
        )
    )
