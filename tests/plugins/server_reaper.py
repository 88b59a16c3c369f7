"""Stops a test stack's servers when the pytest process that started them dies, however it dies.

The launcher starts each server in a session of its own, so that it outlives `iot-stack up`;
a test stack is stopped by its fixture's finalizer. A pytest killed by SIGTERM (Python's default
action runs no finalizer) or SIGKILL (a harness' timeout) left Mosquitto and Kafka running: a
`pytest-*/stack0` Mosquitto was seen 50 min after its run. So each test stack gets a reaper: a
process of its own session reading a pipe only pytest holds open. The kernel closes that pipe
when pytest exits, whatever the cause; at EOF the reaper stops every server with a pid file in
the stack's run dir (pid files hold the argv, so a reused pid is never signalled).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from stack.process import ManagedProcess


def stop_all(run_dir: Path) -> list[str]:
    """SIGTERM (then SIGKILL) every process with a pid file in run_dir; the names stopped."""
    stopped = []
    for pid_file in sorted(run_dir.glob("*.pid")):
        name = pid_file.stem
        if ManagedProcess(name, run_dir, run_dir / "reaper.log").stop(timeout=20.0):
            stopped.append(name)
    return stopped


@contextlib.contextmanager
def reaper(run_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Watch over the servers of run_dir for as long as this process lives."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.plugins.server_reaper", str(run_dir)],
        stdin=subprocess.PIPE,
        start_new_session=True,  # a signal to pytest's process group does not reach it
    )
    try:
        yield proc
    finally:
        # a normal end: the finalizer stopped the servers already; EOF lets the reaper go
        assert proc.stdin is not None
        proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)


def main() -> None:
    run_dir = Path(sys.argv[1])
    sys.stdin.buffer.read()  # returns at EOF: pytest closed the pipe or died
    stopped = stop_all(run_dir)
    if stopped:
        print(f"server_reaper: pytest gone, stopped {', '.join(stopped)} of {run_dir}")


if __name__ == "__main__":
    main()
