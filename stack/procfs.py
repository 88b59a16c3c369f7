"""What /proc says about a process: its state, argv, start time, process group; the boot id.

A pid alone names a process only until it exits: the start time (clock ticks after boot, stat
field 22) and the boot id tell it from a later process that got the same pid.
"""

from __future__ import annotations

from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields from the state letter on (field 3 is index 0), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the fields follow the parenthesised command name, which may itself contain spaces
    return stat.rsplit(")", 1)[1].split()


def proc_state(pid: int) -> str | None:
    fields = proc_stat(pid)
    return fields[0] if fields else None


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (exited, not yet reaped) or dead task does not."""
    return proc_state(pid) not in {None, "Z", "X"}


def proc_start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks after boot (stat field 22): with the boot id, it
    tells this process from a later one that got the same pid."""
    fields = proc_stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def proc_argv(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def group_members(pgid: int) -> list[int]:
    """The live processes in process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = proc_stat(int(entry.name))
        if fields and len(fields) > 2 and fields[0] not in {"Z", "X"} and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found
