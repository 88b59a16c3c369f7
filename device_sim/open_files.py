"""The open-file limit (RLIMIT_NOFILE) a big fleet needs: one socket per device connection.

Used by the simulator's workers and by the launcher for the servers it starts (Mosquitto holds
one socket per device). The soft limit is raised to ``wanted``; when the hard limit is lower,
the hard limit is raised too where the process may (root or CAP_SYS_RESOURCE, capped by the
kernel's ``fs.nr_open``), else the soft limit stops at the hard one.
"""

from __future__ import annotations

import resource
from pathlib import Path

NR_OPEN = Path("/proc/sys/fs/nr_open")


def raise_open_files(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted``; returns the soft limit reached."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = min(wanted, _kernel_max())
    if hard != resource.RLIM_INFINITY and hard < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
        except (ValueError, OSError):  # not privileged: up to the hard limit only
            target = hard
        else:
            return target
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _kernel_max() -> int:
    try:
        return int(NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20
