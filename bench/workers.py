"""Worker processes of the load generator and the command responder: started, killed.

Both spread their connections over a few spawned processes, each told its index; a process
that does not stop is killed rather than waited for.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable
from typing import Any


def raise_fd_limit() -> None:
    """Soft open-file limit up to the hard one: a process holds one socket per device."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def spawn_workers(ctx: Any, target: Callable[..., None], count: int, **kwargs: Any) -> list[Any]:
    """Start ``count`` daemon processes of ``ctx`` (a multiprocessing context) running
    ``target(index=i, **kwargs)``; returns them in index order."""
    procs = []
    for i in range(count):
        p = ctx.Process(target=target, kwargs={"index": i, **kwargs}, daemon=True)
        p.start()
        procs.append(p)
    return procs


def kill_workers(procs: list[Any]) -> None:
    """Kill the processes still alive and reap them."""
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
