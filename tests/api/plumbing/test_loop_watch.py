"""The event loop's watch: a blocking call on the loop is noticed, located and counted."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import CollectorRegistry

from api.plumbing.loop_watch import LoopWatch


def _blocks_the_loop() -> None:
    time.sleep(1.0)


def test_a_stall_is_logged_with_the_blocking_call_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = LoopWatch(beat_s=0.05, stall_s=0.4)

    async def main() -> None:
        watch.start()
        await asyncio.sleep(0.3)  # turning: nothing to report
        assert watch.stalls == 0
        _blocks_the_loop()
        await asyncio.sleep(0.2)
        watch.stop()

    with caplog.at_level(logging.WARNING, "api.plumbing.loop_watch"):
        asyncio.run(main())
    assert watch.stalls == 1
    assert 0.5 < watch.longest_s < 5
    stacks = [r.getMessage() for r in caplog.records if "has not turned" in r.getMessage()]
    assert len(stacks) == 1
    assert "_blocks_the_loop" in stacks[0]
    registry = CollectorRegistry()
    registry.register(watch)
    assert registry.get_sample_value("iot_api_event_loop_stalls_total") == 1
    assert registry.get_sample_value("iot_api_event_loop_longest_stall_seconds") == watch.longest_s
