"""TelemetryBridge's life cycle and health, with fake clients."""

from __future__ import annotations

from bridge.service import TelemetryBridge
from tests.bridge.fakes import FakeProducer, FakeSubscriber


def test_alive_until_the_loop_stops_ticking(
    rig: tuple[TelemetryBridge, FakeProducer, FakeSubscriber],
) -> None:
    bridge, _, _ = rig
    bridge.started = True
    bridge._tick()
    assert bridge.alive
    bridge.last_tick -= 11
    assert not bridge.alive
