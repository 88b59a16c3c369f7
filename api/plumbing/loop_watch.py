"""Is the event loop turning? A stalled loop answers nothing, not even ``/readyz``.

Every blocking Kafka call of iot-api belongs in a worker thread; one that runs on the loop
instead (a client freed there, a close, a flush) stalls every request at once. A heartbeat on
the loop every ``beat_s`` and a watcher thread: when the heartbeat is more than ``stall_s``
late, the watcher logs the loop thread's stack once for that stall (what is blocking it, for
the operator and for a failed test's log), and counts it for ``/metrics``
(``iot_api_event_loop_stalls_total``, ``iot_api_event_loop_longest_stall_seconds``)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


class LoopWatch(Collector):
    def __init__(self, *, beat_s: float = 0.25, stall_s: float = 2.0) -> None:
        self._beat_s = beat_s
        self._stall_s = stall_s
        self._last_beat = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.stalls = 0
        self.longest_s = 0.0

    def start(self) -> None:
        """On the loop to watch."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._beat()
        self._watcher = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def _beat(self) -> None:
        now = time.monotonic()
        late = now - self._last_beat - self._beat_s
        if late > self._stall_s:  # the stall is over: its full length
            self.longest_s = max(self.longest_s, late)
            log.warning("the event loop was stalled for %.1f s", late)
        self._last_beat = now
        assert self._loop is not None
        self._handle = self._loop.call_later(self._beat_s, self._beat)

    def _watch(self) -> None:
        reported = 0.0  # the beat whose lateness was reported
        while not self._stop.wait(self._beat_s):
            last = self._last_beat
            late = time.monotonic() - last - self._beat_s
            if late <= self._stall_s or last == reported:
                continue
            reported = last
            self.stalls += 1
            frame = sys._current_frames().get(self._loop_thread)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "?"
            log.warning("the event loop has not turned for %.1f s; it is at:\n%s", late, stack)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stalls = CounterMetricFamily(
            "iot_api_event_loop_stalls",
            f"Times the event loop did not turn for over {self._stall_s:g} s (a blocking call)",
        )
        stalls.add_metric([], self.stalls)
        yield stalls
        longest = GaugeMetricFamily(
            "iot_api_event_loop_longest_stall_seconds",
            "The longest such stall since start",
        )
        longest.add_metric([], self.longest_s)
        yield longest
