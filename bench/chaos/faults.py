"""The fault injectors (adapters: signals, files): each hurts one service of a running
:class:`ChaosStack` and returns once the fault is over (a hung process continued, space given
back); recovery is then the supervisor's and the clients' business, measured by the caller."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.chaos.stack import ChaosStack
from stack.errors import StackError
from stack.kafka_health import quorum_status

HANG_S = 30.0  # SIGSTOP .. SIGCONT
DISK_FULL_S = 30.0  # the data dir full .. space returned
FILLER = ".chaos-filler"


class FaultError(RuntimeError):
    """A fault could not be injected (no pid, no tmpfs mount)."""


def controller(stack: ChaosStack, timeout: float = 120) -> int:
    """The node id of the active KRaft controller now: the raft leader as the metadata quorum
    reports it (not AdminClient's `controller_id`, which names some broker), asked again while
    the quorum has no leader (an election) or does not answer."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            leader = quorum_status(stack.bootstrap, timeout=60).leader_id
        except (StackError, OSError, subprocess.TimeoutExpired) as exc:
            last = str(exc)
        else:
            if 1 <= leader <= stack.kafka_nodes:
                return leader
            last = f"no leader (node {leader})"
        time.sleep(2)
    raise FaultError(f"no active KRaft controller found within {timeout:.0f} s: {last[-200:]}")


def target(stack: ChaosStack, service: str) -> str:
    """The supervised service a cell's fault hits: the service itself, or for a cluster's
    `kafka-controller` the node that is the active controller now and for `kafka-broker` the
    first node that is not (`kafka-N`)."""
    if service not in ("kafka-broker", "kafka-controller"):
        return service
    if stack.kafka_nodes < 3:
        raise FaultError(f"{service} needs the 3-node cluster (--kafka-nodes 3)")
    leader = controller(stack)
    if service == "kafka-controller":
        return f"kafka-{leader}"
    return f"kafka-{next(n for n in range(1, stack.kafka_nodes + 1) if n != leader)}"


def _pid(stack: ChaosStack, service: str) -> int:
    pid = stack.pid(service)
    if pid is None:
        raise FaultError(f"{service} has no pid (not running?)")
    return pid


def _wait_new_pid(stack: ChaosStack, service: str, old: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while stack.pid(service) in (None, old):
        if time.monotonic() > deadline:
            raise FaultError(f"{service} not restarted within {timeout:.0f} s")
        time.sleep(0.2)


def kill9(stack: ChaosStack, service: str) -> None:
    if service == "supervisor":
        _supervisor_kill(stack)
        return
    os.kill(_pid(stack, service), signal.SIGKILL)


def stop30(stack: ChaosStack, service: str) -> None:
    pid = _pid(stack, service)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(HANG_S)  # the fault's length: a hung process for 30 s
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def restart(stack: ChaosStack, service: str) -> None:
    """SIGTERM (the service's clean shutdown); the supervisor starts it again."""
    old = _pid(stack, service)
    os.kill(old, signal.SIGTERM)
    _wait_new_pid(stack, service, old, timeout=120)


def disk_full(stack: ChaosStack, service: str) -> None:
    """Fill the service's tmpfs data dir for DISK_FULL_S, then free it."""
    filler = fill(stack, service)
    try:
        time.sleep(DISK_FULL_S)  # the fault's length: the disk full for 30 s
    finally:
        filler.unlink(missing_ok=True)  # space returned


def fill(stack: ChaosStack, service: str) -> Path:
    """Fill the service's tmpfs data dir to the last byte; the filler file, whose removal gives
    the space back (FaultError if the dir is no tmpfs mount of this stack)."""
    mount = stack.mounts.get(service)
    if mount is None:
        raise FaultError(f"{service}'s data dir is no tmpfs mount (run as root to get one)")
    if not os.path.ismount(mount):  # never fill the disk the dir would otherwise be on
        raise FaultError(f"{service}'s data dir {mount} is not mounted")
    filler = Path(mount) / FILLER
    try:
        stat = os.statvfs(mount)
        free = stat.f_bavail * stat.f_frsize
        subprocess.run(["fallocate", "-l", str(free), str(filler)], capture_output=True,
                       check=False)  # fmt: skip
        # whatever fallocate left (rounding, or all of it where tmpfs refused the size at
        # once), taken by plain writes until ENOSPC
        with contextlib.suppress(OSError), filler.open("ab") as f:
            block = b"\0" * (1 << 20)
            while True:
                f.write(block)
                f.flush()
        with contextlib.suppress(OSError), filler.open("ab") as f:
            while True:  # the last partial MiB
                f.write(b"\0" * 4096)
                f.flush()
    except BaseException:
        filler.unlink(missing_ok=True)
        raise
    return filler


def _supervisor_kill(stack: ChaosStack) -> None:
    """kill -9 of the supervisor takes its services down with it (PDEATHSIG, docs/operations.md
    "Supervision"); `iot-stack up` again (what systemd does) brings the stack back."""
    os.kill(_pid(stack, "supervisor"), signal.SIGKILL)
    # the services got SIGTERM at once; `up` first stops what a dead supervisor left
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "up", *stack.args, *stack.up_extra],
        capture_output=True, text=True, timeout=600, check=False, env=stack.env,
    )  # fmt: skip
    if done.returncode != 0:
        raise FaultError(f"`up` after the supervisor's kill -9 failed: {done.stderr[-500:]}")


INJECTORS: dict[str, Callable[[ChaosStack, str], None]] = {
    "kill9": kill9, "stop30": stop30, "restart": restart, "disk-full": disk_full,
}  # fmt: skip
