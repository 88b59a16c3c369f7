"""Caps on what one process serves at once (pure): long polls beyond the cap are refused at
once with 429 and MR's TOO_MANY_REQUESTS code rather than queued (a queued long poll would hold a
socket and memory while it waits)."""

from __future__ import annotations

from api.errors import TOO_MANY_REQUESTS, ApiError

LONG_POLL_HANDLERS = frozenset({"consume"})
# every Server-Sent Events stream of the service shares one cap (issue 14 item 8)
SSE_HANDLERS = frozenset({"sawmill_realtime", "device_telemetry_stream"})


class Gate:
    def __init__(self, capacity: int, what: str = "long polls") -> None:
        self.capacity = capacity
        self.inside = 0
        self.what = what

    def enter(self) -> None:
        if self.inside >= self.capacity:
            raise ApiError(
                429,
                TOO_MANY_REQUESTS,
                f"Too many {self.what} in progress ({self.capacity}). Please retry later.",
            )
        self.inside += 1

    def leave(self) -> None:
        self.inside -= 1
