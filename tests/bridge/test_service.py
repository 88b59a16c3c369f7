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


def test_tune_gc_collects_rarely_and_freezes_the_start_up() -> None:
    import gc

    from bridge.service import tune_gc

    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold()[0] >= 100_000
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
