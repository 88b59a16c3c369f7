"""Pacing: the per-process connection-rate limiter."""

from __future__ import annotations

import asyncio

from device_sim.pacing import ConnectLimiter


def test_connect_limiter_spaces_attempts() -> None:
    async def go() -> float:
        limiter = ConnectLimiter(100.0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(11):
            await limiter.acquire()
        return loop.time() - start

    elapsed = asyncio.run(go())
    assert 0.09 <= elapsed < 0.5
