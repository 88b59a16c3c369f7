"""The supervisor daemon with ordinary programs standing in for services (no servers)."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stack.process import ManagedProcess
from stack.procfs import alive as _alive
from stack.supervision import RestartPolicy, ServiceRecord
from stack.supervisor import Supervisor, exit_reason
from stack.supervisor_link import SupervisorLink

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]
POLICY = RestartPolicy(initial_s=0.5, factor=2.0, max_s=2.0, stable_s=30.0)


class Running:
    def __init__(self, run_dir: Path, children_die_with_it: bool = True) -> None:
        self.supervisor = Supervisor(
            run_dir, POLICY, poll_s=0.05, children_die_with_it=children_die_with_it
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.supervisor.run, args=(self.stop,))
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    run = tmp_path / "run"
    yield run
    # whatever a test left running goes (the services are in sessions of their own)
    link = SupervisorLink(run)
    link.withdraw_all()
    for pid_file in run.glob("*.pid"):
        ManagedProcess(pid_file.stem, run, tmp_path / "x.log").stop(timeout=5)


@pytest.fixture
def supervisor(run_dir: Path) -> Iterator[Callable[..., Running]]:
    made: list[Running] = []

    def start(children_die_with_it: bool = True) -> Running:
        made.append(Running(run_dir, children_die_with_it))
        return made[-1]

    yield start
    for running in made:
        running.close()


def _proc(run_dir: Path, link: SupervisorLink | None, name: str = "svc") -> ManagedProcess:
    return ManagedProcess(name, run_dir, run_dir.parent / "logs" / f"{name}.log", link)


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - started


def _replaced(proc: ManagedProcess, old: int) -> Callable[[], bool]:
    return lambda: proc.pid() not in (None, old)


def _recorded(link: SupervisorLink, restarts: int) -> bool:
    return _record(link).restarts >= restarts


def _record(link: SupervisorLink, name: str = "svc") -> ServiceRecord:
    rec = link.record(name)
    assert rec is not None
    return rec


def test_killed_service_is_restarted_with_growing_backoff_and_counted(
    run_dir: Path, supervisor: Callable[[], Running]
) -> None:
    supervisor()
    link = SupervisorLink(run_dir)
    proc = _proc(run_dir, link)
    first = proc.start(SLEEPER)
    proc.wait_ready(lambda: "up" in proc.log_since_start(), 10, "printed up")

    waits = []
    pid = first
    for restarts in (1, 2, 3):
        os.kill(pid, signal.SIGKILL)
        waits.append(_wait(_replaced(proc, pid), 10, "a new pid"))
        pid = proc.pid() or 0
        # the new pid file is written before the supervisor's state file: wait for both
        _wait(functools.partial(_recorded, link, restarts), 10, f"restart {restarts} recorded")
        rec = _record(link)
        assert rec.restarts == restarts
        assert rec.last_exit == "killed by SIGKILL"
    # 0.5 s, 1 s, 2 s (capped) plus the poll: each wait at least its backoff, and growing
    assert waits[0] >= 0.45, waits
    assert waits[1] >= 0.95, waits
    assert waits[2] >= 1.95, waits
    assert waits[2] < 15, waits  # the 2 s cap, with room for a loaded machine
    log_text = proc.log_path.read_text()
    assert "supervisor restart 3 of svc after killed by SIGKILL" in log_text


def test_stopped_service_stays_stopped(run_dir: Path, supervisor: Callable[[], Running]) -> None:
    supervisor()
    link = SupervisorLink(run_dir)
    proc = _proc(run_dir, link)
    proc.start(SLEEPER)
    assert proc.stop(timeout=5) is True
    time.sleep(POLICY.initial_s * 3)
    assert proc.pid() is None
    assert link.record("svc") is None  # withdrawn and forgotten
    assert link.specs() == {}


def test_early_exit_is_reported_with_the_reason(
    run_dir: Path, supervisor: Callable[[], Running]
) -> None:
    from stack.errors import StackError

    supervisor()
    proc = _proc(run_dir, SupervisorLink(run_dir))
    proc.start([sys.executable, "-c", "print('bind failed: port taken'); raise SystemExit(3)"])
    with pytest.raises(StackError, match=r"exited \(exit code 3\)[\s\S]*port taken"):
        proc.wait_ready(lambda: False, 30, "never")
    proc.stop()


def test_a_new_supervisor_adopts_running_services(
    run_dir: Path, supervisor: Callable[..., Running]
) -> None:
    # services that outlived their supervisor (one of an older version, whose children did
    # not die with it): a supervisor started by hand adopts them
    first = supervisor(children_die_with_it=False)
    link = SupervisorLink(run_dir)
    proc = _proc(run_dir, link)
    pid = proc.start(SLEEPER)
    first.close()  # the supervisor goes; the service stays
    assert proc.pid() == pid
    supervisor()
    _wait(lambda: _record(link).adopted if link.record("svc") else False, 10, "adopted")
    assert _record(link).pid == pid
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: proc.pid() not in (None, pid), 10, "restarted after adoption")
    _wait(functools.partial(_recorded, link, 1), 10, "the restart recorded")
    rec = _record(link)
    assert rec.restarts == 1
    assert rec.last_exit is not None
    assert rec.last_exit.startswith("gone")


def test_exit_reasons() -> None:
    assert exit_reason(-9) == "killed by SIGKILL"
    assert exit_reason(2) == "exit code 2"
    assert exit_reason(None).startswith("gone")


def test_a_dead_services_helpers_go_with_it(
    run_dir: Path, supervisor: Callable[[], Running]
) -> None:
    supervisor()
    link = SupervisorLink(run_dir)
    proc = _proc(run_dir, link)
    helper_file = run_dir.parent / "helper.pid"
    code = (
        "import subprocess, sys, time;"
        "h = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']);"
        f"open({str(helper_file)!r}, 'w').write(str(h.pid));"
        "print('up', flush=True); time.sleep(120)"
    )
    pid = proc.start([sys.executable, "-c", code])
    proc.wait_ready(lambda: "up" in proc.log_since_start(), 10, "printed up")
    helper = int(helper_file.read_text())
    os.kill(pid, signal.SIGKILL)  # the helper is orphaned, still in the service's group
    _wait(_replaced(proc, pid), 10, "restarted")
    _wait(lambda: not _alive(helper), 5, "the orphaned helper killed")


def test_its_services_get_sigterm_when_it_ends(
    run_dir: Path, supervisor: Callable[..., Running]
) -> None:
    running = supervisor()
    link = SupervisorLink(run_dir)
    proc = _proc(run_dir, link)
    code = (
        "import signal, sys, time;"
        "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(0)));"
        "print('up', flush=True); time.sleep(120)"
    )
    pid = proc.start([sys.executable, "-c", code])
    proc.wait_ready(lambda: "up" in proc.log_since_start(), 30, "printed up")
    running.close()  # the thread that forked it ends: PR_SET_PDEATHSIG fires
    _wait(lambda: not _alive(pid), 30, "the service gone with its supervisor")
    assert "got SIGTERM" in proc.log_since_start(), proc.log_since_start()  # a clean stop


def test_kill_9_of_the_supervisor_process_stops_its_services(tmp_path: Path) -> None:
    """The real daemon (`iot-stack supervise`) killed by SIGKILL: its service gets SIGTERM, and
    `up`'s check then finds nothing running (no orphan left to hold a port)."""
    data_dir = tmp_path / "var"
    run = data_dir / "run"
    daemon = ManagedProcess("supervisor", run, data_dir / "logs" / "supervisor.log")
    daemon.start([sys.executable, "-m", "stack.cli", "supervise", "--data-dir", str(data_dir)])
    link = SupervisorLink(run)
    try:
        _wait(lambda: link.state() is not None, 30, "the supervisor's state file")
        main_pid = int(link.main_pid_path.read_text())
        assert main_pid == daemon.pid()
        proc = _proc(run, link)
        code = (
            "import signal, sys, time;"
            "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True),"
            " sys.exit(0)));"
            "print('up', flush=True); time.sleep(120)"
        )
        pid = proc.start([sys.executable, "-c", code])
        proc.wait_ready(lambda: "up" in proc.log_since_start(), 30, "printed up")
        os.kill(main_pid, signal.SIGKILL)
        _wait(lambda: not _alive(pid), 30, "the service gone with its supervisor")
        assert "got SIGTERM" in proc.log_since_start(), proc.log_since_start()
        assert proc.pid() is None
    finally:
        link.withdraw_all()
        daemon.stop(timeout=5)
