"""CPU time, peak memory and disk writes of a process, read from /proc (Linux)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    # after the command name: state is fields[0]; utime, stime are stat fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM) in MiB, None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def write_bytes(pid: int) -> int | None:
    """The bytes the process has caused to be written to storage so far (``write_bytes`` of
    /proc/PID/io), None if it is gone or unreadable."""
    try:
        io = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return None
    for line in io.splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return None


def machine_busy_seconds() -> float | None:
    """CPU seconds all cores have spent not idle since boot (None if /proc/stat is unreadable)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu":
        return None
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]
    return busy / _TICKS


class CpuMeter:
    """CPU seconds used by a set of processes between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = list(pids)
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def start(self) -> None:
        for pid in self.pids:
            value = cpu_seconds(pid)
            if value is not None:
                self._start[pid] = value
                self._last[pid] = value

    def sample(self) -> None:
        """Remember the latest reading (call before a process may exit)."""
        for pid in self.pids:
            value = cpu_seconds(pid)
            if value is not None:
                self._last[pid] = value

    def used(self) -> float | None:
        self.sample()
        if not self._start:
            return None
        return sum(self._last[p] - self._start[p] for p in self._start)


class MachineCpuMeter:
    """CPU seconds all cores spent busy (any process) between :meth:`start` and :meth:`used`."""

    def __init__(self, read: Callable[[], float | None] = machine_busy_seconds) -> None:
        self._read = read
        self._start: float | None = None

    def start(self) -> None:
        self._start = self._read()

    def used(self) -> float | None:
        now = self._read()
        return None if now is None or self._start is None else now - self._start


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU seconds per thread name of a process (threads of one name summed)."""
    out: dict[str, float] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICKS
    return out
