"""CPU and RSS of the run's processes over time, with the fleet's live counters (a thread)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.procstat import cpu_seconds

PidsOf = Callable[[], list[int]]


def rss_mb(pid: int) -> float | None:
    """Current resident set (VmRSS) in MiB, None if the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def open_files_limit(pid: int) -> int | None:
    """The soft "Max open files" of a running process (from /proc/<pid>/limits)."""
    try:
        text = Path(f"/proc/{pid}/limits").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Max open files"):
            value = line.split()[3]
            return None if value == "unlimited" else int(value)
    return None


def simulator_pids() -> list[int]:
    """This process (it runs the fleet) and its live worker processes."""
    return [os.getpid(), *(p.pid for p in multiprocessing.active_children() if p.pid)]


class Sampler:
    """Every ``interval`` s: per role, CPU use (cores) since the last sample and RSS (MiB)."""

    def __init__(
        self, roles: Mapping[str, PidsOf], stats: Callable[[], dict[str, Any]], interval: float
    ) -> None:
        self.roles = dict(roles)
        self.stats = stats
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fleet-sampler", daemon=True)
        self._t0 = time.monotonic()
        self._cpu: dict[int, float] = {}
        self._last = self._t0

    def start(self) -> None:
        self._t0 = self._last = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        now = time.monotonic()
        dt = now - self._last
        self._last = now
        row: dict[str, Any] = {"t_s": round(now - self._t0, 2), "wall_ms": int(time.time() * 1000)}
        for role, pids_of in self.roles.items():
            cpu_used = 0.0
            rss = 0.0
            for pid in pids_of():
                cpu = cpu_seconds(pid)
                mem = rss_mb(pid)
                if cpu is None or mem is None:
                    continue
                before = self._cpu.get(pid)
                self._cpu[pid] = cpu
                if before is not None:
                    cpu_used += cpu - before
                rss += mem
            row[f"{role}_cpu"] = round(cpu_used / dt, 3) if dt > 0 else None
            row[f"{role}_rss_mb"] = round(rss, 1)
        snap = self.stats()
        for key in ("connected", "published", "acked", "awaiting_ack", "connect_failures"):
            row[key] = snap.get(key, 0)
        self.samples.append(row)
