"""ManagedProcess with ordinary programs standing in for servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stack.errors import StackError
from stack.process import ManagedProcess


def _proc(tmp_path: Path) -> ManagedProcess:
    return ManagedProcess("dummy", tmp_path / "run", tmp_path / "logs" / "dummy.log")


def test_start_find_stop(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    pid = proc.start([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"])
    # a second handle on the same pid file (a later `iot-stack status`) finds it
    assert _proc(tmp_path).pid() == pid
    proc.wait_ready(lambda: "up" in proc.log_since_start(), 10, "printed up")
    with pytest.raises(StackError, match="already running"):
        proc.start([sys.executable, "-c", "pass"])
    assert proc.stop(timeout=10) is True
    assert proc.pid() is None
    assert not proc.pid_path.exists()
    assert proc.stop() is False


def test_sigterm_ignored_then_killed(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "print('ready', flush=True); time.sleep(60)"
    )
    proc.start([sys.executable, "-c", code])
    proc.wait_ready(lambda: "ready" in proc.log_since_start(), 10, "ready")
    assert proc.stop(timeout=0.5) is True
    assert proc.pid() is None


def test_early_exit_fails_fast_with_log_tail(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    proc.start([sys.executable, "-c", "print('bind failed: port taken'); raise SystemExit(3)"])
    with pytest.raises(StackError, match=r"exited \(code 3\)[\s\S]*bind failed: port taken"):
        proc.wait_ready(lambda: False, 30, "never")


def test_timeout_stops_the_process(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    proc.start([sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(StackError, match="not ready"):
        proc.wait_ready(lambda: False, 0.5, "never")
    assert proc.pid() is None


def test_reused_pid_is_not_ours(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    proc.pid_path.parent.mkdir(parents=True)
    # our own pid, but another program's argv: must not be taken for the server
    import os

    proc.pid_path.write_text(json.dumps({"pid": os.getpid(), "argv": ["mosquitto", "-c", "x"]}))
    assert proc.pid() is None
