"""A test process killed with SIGKILL (no finalizer runs) leaves no server behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from stack.process import ManagedProcess

PARENT = """
import sys, time
from pathlib import Path
from stack.process import ManagedProcess
from tests.plugins.server_reaper import reaper
run_dir = Path(sys.argv[1])
with reaper(run_dir) as watching:
    ManagedProcess("server", run_dir, run_dir / "server.log").start(["sleep", "300"])
    print(watching.pid, flush=True)
    sys.stdin.readline()  # the test has seen the server
    if sys.argv[2] == "die":
        time.sleep(300)
    ManagedProcess("server", run_dir, run_dir / "server.log").stop()
"""


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def _wait(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _parent(run_dir: Path, how: str) -> tuple[subprocess.Popen[bytes], int, int]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(run_dir), how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert parent.stdout is not None
    assert parent.stdin is not None
    reaper_pid = int(parent.stdout.readline())
    server = ManagedProcess("server", run_dir, run_dir / "server.log").pid()
    assert server is not None
    parent.stdin.write(b"seen\n")
    parent.stdin.flush()
    return parent, reaper_pid, server


def test_the_servers_of_a_killed_test_process_are_stopped(tmp_path: Path) -> None:
    parent, reaper_pid, server = _parent(tmp_path / "run", "die")
    assert not _wait(lambda: _gone(server), 1.0), "the server runs while its test process does"
    parent.kill()
    parent.wait()
    assert _wait(lambda: _gone(server), 30.0), f"server (pid {server}) outlived the test process"
    assert _wait(lambda: _gone(reaper_pid), 10.0), "the reaper exits after its work"


def test_a_normal_end_lets_the_reaper_go(tmp_path: Path) -> None:
    parent, reaper_pid, server = _parent(tmp_path / "run", "end")
    assert parent.wait(60) == 0
    assert _gone(server)
    assert _wait(lambda: _gone(reaper_pid), 10.0), "the reaper exits with its test process"
