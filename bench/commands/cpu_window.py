"""CPU seconds of named groups of processes (and of the whole machine) between two marks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from bench.procstat import cpu_seconds, machine_busy_seconds

MACHINE = "whole machine (/proc/stat, any process)"


def _children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def tree_cpu_seconds(pids: list[int], children: Mapping[int, list[int]]) -> float | None:
    """CPU seconds of the processes and all their descendants (None if none is alive)."""
    total = 0.0
    found = False
    todo = list(pids)
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        value = cpu_seconds(pid)
        if value is not None:
            total += value
            found = True
        todo.extend(children.get(pid, []))
    return total if found else None


def disturbance_note(cpu: Mapping[str, float | None], window_s: float, cores: int) -> str | None:
    """A note when processes other than the benchmark's used over 10% of the machine."""
    machine, ours = cpu.get(MACHINE), cpu.get("total")
    if machine is None or ours is None or window_s <= 0:
        return None
    other = machine - ours
    if other <= 0.10 * cores * window_s:
        return None
    return (
        f"DISTURBED? work outside the benchmark's processes (other users, the kernel) used "
        f"{other:.1f} CPU s of the {cores * window_s:.1f} "
        f"available in the measured window ({other / (cores * window_s):.0%} of the machine)"
    )


class CpuWindow:
    """CPU seconds used by named groups of processes between two marks.

    A group counts its processes' descendants too (iot-sim's worker processes, a launcher's
    child), except the groups named in ``alone`` (this process: its children are the others).
    """

    def __init__(
        self, groups: Mapping[str, Callable[[], list[int]]], alone: frozenset[str] = frozenset()
    ) -> None:
        self.groups = dict(groups)
        self.alone = alone
        self._before: dict[str, float | None] = {}

    def _read(self) -> dict[str, float | None]:
        children = _children_map()
        out = {
            name: tree_cpu_seconds(get(), {} if name in self.alone else children)
            for name, get in self.groups.items()
        }
        out[MACHINE] = machine_busy_seconds()
        return out

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float | None]:
        after = self._read()
        out: dict[str, float | None] = {}
        for name, value in after.items():
            before = self._before.get(name)
            out[name] = (
                round(value - before, 3) if value is not None and before is not None else None
            )
        machine = out.pop(MACHINE)
        known = [v for v in out.values() if v is not None]
        out["total"] = round(sum(known), 3) if known else None
        out[MACHINE] = machine  # everything on the machine, other users' work included
        return out
