"""How a process's devices connect and start: a connection-rate limiter and a start gate."""

from __future__ import annotations

import asyncio


class StartGate:
    """Opens when every device of the process has connected (or given up)."""

    def __init__(self, devices: int) -> None:
        self._left = devices
        self.opened = asyncio.Event()
        if devices <= 0:
            self.opened.set()

    def arrive(self) -> None:
        self._left -= 1
        if self._left <= 0:
            self.opened.set()


class ConnectLimiter:
    """Spaces connection attempts ``1/rate`` seconds apart (per process)."""

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        slot = max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await asyncio.sleep(slot - now)
