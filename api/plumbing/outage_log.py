"""One warning per outage, not one per refused request: while a dependency (Kafka) does not
answer, every request that needs it is refused, and logging each refusal flooded iot-api's log
(1,207 warnings in a few minutes of a Kafka restart under the chaos load, issue 32). The first
failure is logged at once, then a reminder with the count at most every ``every_s`` seconds,
and the recovery once, with how long it lasted. Pure: the clock is given."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class OutageLog:
    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._what = what
        self._every_s = every_s
        self._clock = clock
        self._since: float | None = None  # when the outage began; None while it answers
        self._last_report = 0.0
        self._unreported = 0  # failures since the last line
        self._failures = 0  # failures in this outage

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, reason: object) -> None:
        now = self._clock()
        self._failures += 1
        if self._since is None:
            self._since = self._last_report = now
            self._unreported = 0
            self._log.warning("%s: %s", self._what, reason)
            return
        self._unreported += 1
        if now - self._last_report >= self._every_s:
            self._log.warning(
                "%s, still (%.0f s, %d more refusals since the last report): %s",
                self._what,
                now - self._since,
                self._unreported,
                reason,
            )
            self._last_report = now
            self._unreported = 0

    def answered(self) -> None:
        if self._since is None:
            return
        self._log.info(
            "%s: answers again after %.0f s (%d refusals)",
            self._what,
            self._clock() - self._since,
            self._failures,
        )
        self._since = None
        self._failures = 0
