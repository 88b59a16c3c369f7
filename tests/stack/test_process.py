"""ManagedProcess with ordinary programs standing in for servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stack.errors import StackError
from stack.process import ManagedProcess
from stack.procfs import alive as _alive
from stack.procfs import boot_id, proc_start_ticks


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
    proc.pid_path.write_text(json.dumps({"pid": os.getpid(), "argv": ["mosquitto", "-c", "x"]}))
    assert proc.pid() is None


def _sleeper(tmp_path: Path) -> tuple[ManagedProcess, int]:
    proc = _proc(tmp_path)
    return proc, proc.start([sys.executable, "-c", "import time; time.sleep(60)"])


def test_pid_file_records_start_time_and_boot(tmp_path: Path) -> None:
    proc, pid = _sleeper(tmp_path)
    try:
        rec = proc.record()
        assert rec is not None
        assert rec.pid == pid
        assert rec.start == proc_start_ticks(pid) is not None
        assert rec.boot_id == boot_id() != ""
        assert proc.pid() == pid
    finally:
        proc.stop(timeout=5)


@pytest.mark.parametrize("field", ["start", "boot_id"])
def test_same_pid_and_argv_but_a_later_process_is_not_ours(tmp_path: Path, field: str) -> None:
    """A reused pid running the same program (a restart after a reboot, a pid wrap): its start
    time or boot differs from the pid file's, so it is neither found nor signalled."""
    proc, pid = _sleeper(tmp_path)
    try:
        raw = json.loads(proc.pid_path.read_text())
        raw[field] = raw[field] - 1 if field == "start" else "another-boot"
        proc.pid_path.write_text(json.dumps(raw))
        assert proc.pid() is None
        assert proc.stop(timeout=1) is False  # not signalled
        assert Path(f"/proc/{pid}").exists()
    finally:
        os.kill(pid, signal.SIGKILL)
        proc._cleanup()


def test_die_with_parent_sigterms_the_child_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A parent that starts a child with die_with_parent and is then killed by SIGKILL."""
    marker = tmp_path / "child.pid"
    child = (
        "import signal, sys, time;"
        "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True),"
        " sys.exit(0)));"
        "print('ready', flush=True); time.sleep(60)"
    )
    parent = (
        "import sys, time; from pathlib import Path; from stack.process import ManagedProcess;"
        f"p = ManagedProcess('child', Path({str(tmp_path / 'run')!r}),"
        f" Path({str(tmp_path / 'child.log')!r}));"
        f"pid = p.start([sys.executable, '-c', {child!r}], die_with_parent=True);"
        "p.wait_ready(lambda: 'ready' in p.log_since_start(), 20, 'ready');"
        f"Path({str(marker)!r}).write_text(str(pid)); time.sleep(60)"
    )
    father = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(marker.read_text())
    finally:
        father.kill()
        father.wait(10)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert "child got SIGTERM" in (tmp_path / "child.log").read_text()


def test_a_dead_servers_group_is_swept_without_touching_others(tmp_path: Path) -> None:
    """The server died (its supervisor with it) and left a helper in its process group; `stop`
    on its pid file kills the helper, and nothing outside the group."""
    helper_file = tmp_path / "helper.pid"
    code = (
        "import subprocess, sys, time;"
        "h = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"open({str(helper_file)!r}, 'w').write(str(h.pid)); time.sleep(60)"
    )
    proc = _proc(tmp_path)
    pid = proc.start([sys.executable, "-c", code])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 20
        while not (helper_file.exists() and helper_file.read_text()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        helper = int(helper_file.read_text())
        os.kill(pid, signal.SIGKILL)  # the server alone: its helper stays, orphaned
        while proc.returncode() is None:  # reaped (our child here)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _alive(helper)
        assert proc.pid() is None
        assert proc.stop(timeout=1) is False  # nothing running, but the group is swept
        deadline = time.monotonic() + 10
        while _alive(helper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(helper)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait(10)
