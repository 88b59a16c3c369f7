"""A follower's records as Server-Sent Events: sawmill's ``/realtime`` and the operator API's
device telemetry stream (``/ops/devices/{tenant}/{id}/telemetry``) share this loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from aiohttp import web

from api.sawmill.kafka import Follower
from api.sawmill.model import SSE_HEADERS, SSE_HEARTBEAT, Message, sse_retry

POLL_S = 0.5  # one stream read; a closing service ends its streams within this


async def stream_events(
    request: web.Request,
    follower: Follower,
    render: Callable[[list[Message]], list[bytes]],
    closing: asyncio.Event,
    heartbeat_s: float,
) -> web.StreamResponse:
    """Each polled batch as the events ``render`` makes of it, until ``closing`` is set or the
    client leaves; a heartbeat comment after ``heartbeat_s`` without an event."""
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    await response.write(sse_retry(1000))
    quiet_since = time.monotonic()
    with contextlib.suppress(ConnectionResetError):
        while not closing.is_set():
            batch = await asyncio.to_thread(follower.poll, 500, POLL_S)
            chunks = render(batch)
            if chunks:
                await response.write(b"".join(chunks))
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= heartbeat_s:
                await response.write(SSE_HEARTBEAT)  # also finds a client gone
                quiet_since = time.monotonic()
        await response.write_eof()
    return response
