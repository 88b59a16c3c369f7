"""A background server process the launcher starts, finds again later, and stops.

State lives in a pid file (pid, argv, start time and boot id), so `iot-stack status` and
`down` in a later invocation find the processes `up` started; argv, the start time (clock ticks
after boot, /proc/<pid>/stat field 22) and the boot id are compared with /proc, so a reused pid
(after a reboot, or a wrap of the pid counter) is never taken for the server nor signalled.
With a `SupervisorLink` the process is started by the supervisor daemon (`iot-stack
supervise`), which restarts it when it dies; without one it is this process's own child.
A child the supervisor starts dies with it (`die_with_parent`: SIGTERM through
PR_SET_PDEATHSIG, so Kafka and Mosquitto shut down cleanly and save their data).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from device_sim.open_files import raise_open_files
from stack.errors import StackError
from stack.procfs import alive, boot_id, group_members, proc_argv, proc_start_ticks
from stack.supervision import ServiceSpec

if TYPE_CHECKING:
    from stack.supervisor_link import SupervisorLink

log = logging.getLogger(__name__)

_POLL_S = 0.1
SERVER_OPEN_FILES = 262_144  # 250,000 device connections and headroom
_SPAWN_TIMEOUT_S = 30.0  # the supervisor polls its specs every 0.2 s; this is a dead supervisor


def _raise_fd_limit() -> None:
    # Mosquitto holds one socket per device: a 50,000-device fleet needs more than the usual
    # hard limit (often 20,000 or 65,536), which root may raise (device_sim.open_files).
    with contextlib.suppress(ValueError, OSError):
        raise_open_files(SERVER_OPEN_FILES)


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGTERM when the thread that forked it ends (the
    supervisor's main thread: the supervisor process). Kept across exec (not for set-uid
    programs; none is started here)."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork: no import in the child

    def preexec() -> None:
        _raise_fd_limit()
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl: nobody to die with
            os._exit(1)

    return preexec


@dataclass(frozen=True)
class PidRecord:
    """A pid file's content: the process `start()` started, as /proc showed it then."""

    pid: int
    argv: list[str]
    start: int | None  # clock ticks after boot (None: a pid file of an older version)
    boot_id: str


class ManagedProcess:
    """One named server process with a pid file and a log file under the stack's data dir."""

    def __init__(
        self,
        name: str,
        run_dir: Path,
        log_path: Path,
        supervisor: SupervisorLink | None = None,
    ) -> None:
        self.name = name
        self.pid_path = run_dir / f"{name}.pid"
        self.log_path = log_path
        self.supervisor = supervisor
        self._popen: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self._started_pid: int | None = None

    # -- discovery -------------------------------------------------------------------------
    def record(self) -> PidRecord | None:
        """What the pid file says, whether or not the process still runs."""
        try:
            raw = json.loads(self.pid_path.read_text())
            start = raw.get("start")  # absent in pid files of older versions
            return PidRecord(
                pid=int(raw["pid"]),
                argv=[str(a) for a in raw["argv"]],
                start=None if start is None else int(start),
                boot_id=str(raw.get("boot_id") or ""),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def pid(self) -> int | None:
        """The pid of the running process this pid file describes, or None."""
        rec = self.record()
        if rec is None:
            return None
        pid, argv, start, boot = rec.pid, rec.argv, rec.start, rec.boot_id
        if self._popen is not None and self._popen.pid == pid and self._popen.poll() is not None:
            return None
        if not alive(pid):
            return None
        if proc_argv(pid) != argv:
            return None  # the pid was reused by something else
        if start is not None and (proc_start_ticks(pid) != start or boot != boot_id()):
            return None  # the same program, but a later process than the one recorded
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    # -- life cycle ------------------------------------------------------------------------
    def returncode(self) -> int | None:
        """The exit status of our own child once it ended (reaping it), else None."""
        return self._popen.poll() if self._popen is not None else None

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        banner: str | None = None,
        die_with_parent: bool = False,
    ) -> int:
        """Start it (its own session, output to its log); returns its pid.

        `die_with_parent`: it gets SIGTERM when this process's calling thread ends; only for
        a parent that outlives it on purpose (the supervisor), never for `up`, which exits.
        """
        if (pid := self.pid()) is not None:
            raise StackError(f"{self.name} is already running (pid {pid})")
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.supervisor is not None:
            return self._start_supervised(argv, env, cwd)
        preexec = _die_with_parent(os.getpid()) if die_with_parent else _raise_fd_limit
        with self.log_path.open("ab") as log_file:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            banner = banner or f"starting {self.name}"
            log_file.write(f"\n=== iot-stack: {banner} at {stamp} ===\n".encode())
            log_file.flush()
            self._log_offset = log_file.tell()
            self._popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                # outlives `iot-stack up`; a Ctrl-C in that shell does not reach it
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - only setrlimit and prctl, no locks taken
            )
        self._write_pid_file(self._popen.pid, list(argv))
        log.info("started %s (pid %d), log %s", self.name, self._popen.pid, self.log_path)
        self._started_pid = self._popen.pid
        return self._popen.pid

    def _write_pid_file(self, pid: int, argv: list[str]) -> None:
        """pid, argv as /proc shows it (Popen returns once the exec succeeded), start time and
        boot id, replaced atomically."""
        argv_seen = proc_argv(pid)
        record = {
            "pid": pid,
            "argv": argv_seen or argv,
            "start": proc_start_ticks(pid),
            "boot_id": boot_id(),
        }
        tmp = self.pid_path.with_name(f".{self.pid_path.name}.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.pid_path)

    def _start_supervised(
        self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
    ) -> int:
        """Ask the supervisor to run it; returns the pid the supervisor started."""
        assert self.supervisor is not None
        self._popen = None
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0
        requested_at = time.time()
        self.supervisor.request(
            ServiceSpec(
                name=self.name,
                argv=list(argv),
                env=dict(env) if env is not None else dict(os.environ),
                cwd=str(cwd) if cwd is not None else None,
                log_path=str(self.log_path),
                requested_at=requested_at,
            )
        )
        rec = self.supervisor.wait_record(
            self.name,
            lambda r: r.started_at is not None and r.started_at >= requested_at,
            _SPAWN_TIMEOUT_S,
        )
        if rec is None:
            self.supervisor.withdraw(self.name)
            raise StackError(
                f"the supervisor did not start {self.name} within {_SPAWN_TIMEOUT_S:.0f} s "
                "(is it running? see logs/supervisor.log)"
            )
        pid = rec.pid if rec.pid is not None else rec.last_exit_pid
        assert pid is not None
        self._started_pid = pid
        log.info("supervisor started %s (pid %d), log %s", self.name, pid, self.log_path)
        return pid

    def _exit_description(self) -> str:
        if self.supervisor is None:
            code = None
            if self._popen is not None:
                # /proc can show it gone (its argv emptied) a moment before it can be reaped
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = self._popen.wait(timeout=2.0)
            return f"code {code}"
        # the supervisor reaps it and records why, a moment after /proc shows it gone
        started = self._started_pid
        rec = self.supervisor.wait_record(self.name, lambda r: r.last_exit_pid == started, 3.0)
        return rec.last_exit or "unknown" if rec is not None else "reason not recorded"

    def log_since_start(self) -> str:
        try:
            with self.log_path.open("rb") as log_file:
                log_file.seek(self._log_offset)
                return log_file.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_since_start() or ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until `check()` is true; fail fast with the log tail if the process dies."""
        deadline = time.monotonic() + timeout
        while True:
            pid = self.pid()
            if pid is None or (self._started_pid is not None and pid != self._started_pid):
                # gone, or already replaced by the supervisor: this start failed
                raise StackError(
                    f"{self.name} exited ({self._exit_description()}) before it was ready "
                    f"({what}).\n"
                    f"Last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if check():
                return
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise StackError(
                    f"{self.name} was not ready ({what}) within {timeout:.0f} s.\n"
                    f"Last lines of {self.log_path}:\n{tail}"
                )
            time.sleep(_POLL_S)

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM, wait up to `timeout`, then SIGKILL. True if something was running.

        A supervised process is first withdrawn from the supervisor, so it stays stopped.
        """
        if self.supervisor is not None:
            self.supervisor.withdraw(self.name)
        pid = self.pid()
        if pid is None:
            self.sweep_orphaned_group()
            self._cleanup()
            return False
        self._signal(pid, signal.SIGTERM)
        if not self._wait_gone(timeout):
            log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing", self.name, pid, timeout)
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(10.0)
        self.sweep_group(pid)
        self._cleanup()
        return True

    def sweep_group(self, pid: int) -> None:
        """SIGKILL what the dead process `pid` left in its process group (a forked helper).

        The server ran in a session of its own (pgid = its pid): whatever it left behind in
        that group goes with it, so neither `down` nor a restart leaves a process behind.
        """
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def sweep_orphaned_group(self) -> list[int]:
        """SIGKILL what a dead server left in its process group when nobody swept it (its
        supervisor died with it: the analytics job's Spark JVM); returns the pids killed.

        The members are the processes whose group is the recorded pid, started in this boot
        no earlier than the server: a group id is not handed out again while the group has
        members, and a later group with that id would need a new process with that pid,
        which is checked first. Nothing is signalled for a pid file of an older version (no
        start time) or of another boot.
        """
        rec = self.record()
        if rec is None or rec.start is None or rec.boot_id != boot_id():
            return []
        if alive(rec.pid) and proc_start_ticks(rec.pid) != rec.start:
            return []  # the pid (and so the group id) belongs to a later process now
        killed = []
        for member in group_members(rec.pid):
            if (proc_start_ticks(member) or -1) >= rec.start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(member, signal.SIGKILL)
                    killed.append(member)
        if killed:
            log.warning("%s: killed %s, left in its process group", self.name, killed)
        return killed

    def kill(self) -> None:
        """SIGKILL at once: the crash the fault tests need (a supervisor restarts it)."""
        pid = self.pid()
        if pid is not None:
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(10.0)
        self._cleanup()

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._popen is not None:
                self._popen.poll()  # reap our own child so it does not linger as a zombie
            if self.pid() is None:
                return True
            time.sleep(_POLL_S)
        return False

    def _cleanup(self) -> None:
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=1)
        with contextlib.suppress(FileNotFoundError):
            self.pid_path.unlink()
