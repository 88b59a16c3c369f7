"""Health and metrics of the stack's services over HTTP (``/healthz``, ``/metrics``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp

from api.console.overview import Metrics, parse_prometheus


async def _probe(
    session: aiohttp.ClientSession, base: str, timeout_s: float
) -> tuple[bool, Metrics]:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with session.get(base + "/healthz", timeout=timeout) as response:
            up = response.status == 200
        async with session.get(base + "/metrics", timeout=timeout) as response:
            text = await response.text() if response.status == 200 else ""
        return up, parse_prometheus(text)
    except (aiohttp.ClientError, TimeoutError, OSError):
        return False, {}


async def probe_all(
    services: Mapping[str, str], timeout_s: float = 1.5
) -> dict[str, tuple[bool, Metrics]]:
    async with aiohttp.ClientSession() as session:
        names = list(services)
        found = await asyncio.gather(*(_probe(session, services[n], timeout_s) for n in names))
    return dict(zip(names, found, strict=True))
