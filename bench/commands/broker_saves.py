"""Mosquitto's saves during the measured window, from its disk writes.

Mosquitto 2.0 rewrites its whole store at each save (every 5 s with the stack's default) in its
one thread, and serves no client meanwhile. A backlog therefore turns every save into a stall
that grows with the backlog (Session 15 in docs/benchmarks.md: 400-620 MB a save, every 6 s,
with 260,000 messages held). The watch samples the cumulative ``write_bytes`` of
``/proc/<pid>/io`` and groups its increases into saves, so every run says what its saves cost.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.procstat import write_bytes

MIN_SAVE_BYTES = 64 * 1024  # smaller bursts are log lines, not a save
GAP_S = 1.0  # increases closer than this belong to one save


@dataclass(frozen=True)
class Save:
    start: float  # monotonic time of the first sample that saw its bytes
    end: float  # ... and of the last
    bytes: int


def saves_from_samples(
    samples: Sequence[tuple[float, int]], gap_s: float = GAP_S, min_bytes: int = MIN_SAVE_BYTES
) -> list[Save]:
    """Group the increases of a cumulative byte counter, sampled as (time, bytes), into saves:
    increases less than ``gap_s`` apart are one save; saves under ``min_bytes`` are dropped."""
    saves: list[Save] = []
    start = end = 0.0
    size = 0
    for (_t0, b0), (t1, b1) in itertools.pairwise(samples):
        grew = b1 - b0
        if grew <= 0:
            continue
        if size and t1 - end <= gap_s:
            end, size = t1, size + grew
            continue
        if size >= min_bytes:
            saves.append(Save(start, end, size))
        start = end = t1
        size = grew
    if size >= min_bytes:
        saves.append(Save(start, end, size))
    return saves


def summary(saves: Sequence[Save], window_s: float) -> dict[str, float | int]:
    """The figures a run reports: how many saves, what they wrote, how long they held."""
    mb = [s.bytes / 1e6 for s in saves]
    held = [s.end - s.start for s in saves]
    return {
        "saves": len(saves),
        "written_mb": round(sum(mb), 1),
        "largest_mb": round(max(mb, default=0.0), 1),
        "longest_s": round(max(held, default=0.0), 2),
        "share_of_window": round(sum(held) / window_s, 3) if window_s > 0 else 0.0,
    }


class SaveWatch:
    """Samples a process's ``write_bytes`` every ``interval`` s in a thread between start and
    stop; ``stop`` returns the saves seen, None when the process could not be read."""

    def __init__(
        self,
        pid_of: Callable[[], int | None],
        interval: float = 0.1,
        read: Callable[[int], int | None] = write_bytes,
    ) -> None:
        self._pid_of = pid_of
        self._read = read
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mosquitto-saves", daemon=True)

    def _run(self) -> None:
        pid = self._pid_of()
        while pid is not None and not self._stop.is_set():
            value = self._read(pid)
            if value is None:
                return
            self.samples.append((time.monotonic(), value))
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Save] | None:
        self._stop.set()
        self._thread.join(5)
        return saves_from_samples(self.samples) if self.samples else None
