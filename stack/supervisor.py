"""The supervisor daemon (`iot-stack supervise`): keeps every wanted service running.

`iot-stack up` starts it first; it then starts each service `up` asks for (a spec file, see
`stack.supervisor_link`) as its own child, notices a death at once (it reaps its children
every poll), logs it, and restarts the service after an exponential backoff
(`stack.supervision.RestartPolicy`), counting restarts in `run/supervisor.json`. It never stops
a service itself: `down` withdraws the specs first, then stops the services in order, then the
supervisor.

The services die with it: each is started with PR_SET_PDEATHSIG = SIGTERM (`ManagedProcess`'s
`die_with_parent`), so a supervisor that dies, even by `kill -9`, takes no service into an
unsupervised afterlife: Kafka and Mosquitto get SIGTERM and shut down cleanly (Kafka's
controlled shutdown, Mosquitto's save of its store), the bridge and the others stop as on
`down`. PDEATHSIG fires when the *thread* that forked the child ends, so `run()` must be
called on a thread that lives as long as the process (`iot-stack supervise` runs it on the
main thread). The next `up` (or systemd's restart of the unit, `iot-stack systemd`) stops
whatever is still shutting down, verified by argv and start time, then starts the stack again.

A supervisor started by hand over services that run without one (`iot-stack supervise` after
a supervisor of an older version died) adopts them from their pid files and watches them
through /proc, since they are not its children.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

from stack.process import ManagedProcess
from stack.supervision import RestartPolicy, ServiceRecord, ServiceSpec, SupervisorState
from stack.supervisor_link import SupervisorLink

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0  # the state file is rewritten at least this often (status shows its age)


def exit_reason(returncode: int | None) -> str:
    """Popen's returncode in words: 'exit code 1', 'killed by SIGKILL'."""
    if returncode is None:
        return "gone (adopted, so its exit status is unknown)"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class Supervisor:
    def __init__(
        self,
        run_dir: Path,
        policy: RestartPolicy,
        poll_s: float = 0.2,
        children_die_with_it: bool = True,
    ) -> None:
        self.run_dir = run_dir
        # SIGTERM to every service it started when the thread running `run()` ends
        self.children_die_with_it = children_die_with_it
        self.link = SupervisorLink(run_dir)
        self.policy = policy
        self.poll_s = poll_s
        self.records: dict[str, ServiceRecord] = {}
        self._procs: dict[str, ManagedProcess] = {}
        self._requests_seen: dict[str, float] = {}
        self._written_at = 0.0

    # -- start-up: take over what an earlier supervisor left running -----------------------
    def adopt(self) -> None:
        previous = self.link.state()
        for name, spec in self.link.specs().items():
            rec = ServiceRecord(name)
            if previous is not None and name in previous.services:
                old = previous.services[name]
                rec.restarts, rec.last_exit = old.restarts, old.last_exit
                rec.last_exit_pid, rec.last_exit_at = old.last_exit_pid, old.last_exit_at
            proc = self._proc(spec)
            pid = proc.pid()
            if pid is not None:
                rec.pid, rec.adopted, rec.started_at = pid, True, time.time()
                self._requests_seen[name] = spec.requested_at
                log.info("adopted %s (pid %d)", name, pid)
            self.records[name] = rec
        self._write(force=True)

    def _proc(self, spec: ServiceSpec) -> ManagedProcess:
        proc = self._procs.get(spec.name)
        if proc is None or str(proc.log_path) != spec.log_path:
            proc = ManagedProcess(spec.name, self.run_dir, Path(spec.log_path))
            self._procs[spec.name] = proc
        return proc

    # -- one pass ---------------------------------------------------------------------------
    def step(self) -> None:
        specs = self.link.specs()
        now = time.time()
        changed = self._reap(specs, now)
        for name in [n for n, rec in self.records.items() if n not in specs and rec.pid is None]:
            # withdrawn and stopped: forget it (a later `up` starts from a clean record)
            del self.records[name]
            self._procs.pop(name, None)
            self._requests_seen.pop(name, None)
            changed = True
        for spec in specs.values():
            changed |= self._keep_running(spec, now)
        self._write(force=changed)

    def _reap(self, specs: dict[str, ServiceSpec], now: float) -> bool:
        changed = False
        for name, rec in self.records.items():
            if rec.pid is None:
                continue
            proc = self._procs.get(name)
            if rec.adopted or proc is None:
                code = None
                alive = proc is not None and proc.pid() == rec.pid
            else:
                code = proc.returncode()
                alive = code is None
            if alive:
                continue
            changed = True
            if proc is not None:
                proc.sweep_group(rec.pid)  # its helpers (the analytics job's JVM) go with it
            uptime = now - (rec.started_at or now)
            rec.last_exit, rec.last_exit_pid, rec.last_exit_at = exit_reason(code), rec.pid, now
            rec.pid, rec.adopted = None, False
            if name not in specs:
                log.info("%s (pid %d) stopped: %s", name, rec.last_exit_pid, rec.last_exit)
                continue
            rec.streak = self.policy.streak_after_exit(rec.streak, uptime)
            delay = self.policy.delay(rec.streak)
            rec.next_start_at = now + delay
            log.warning(
                "%s (pid %d) died after %.1f s: %s; restart %d in %.1f s",
                name, rec.last_exit_pid, uptime, rec.last_exit, rec.restarts + 1, delay,
            )  # fmt: skip
        return changed

    def _keep_running(self, spec: ServiceSpec, now: float) -> bool:
        rec = self.records.setdefault(spec.name, ServiceRecord(spec.name))
        requested = self._requests_seen.get(spec.name) != spec.requested_at
        self._requests_seen[spec.name] = spec.requested_at
        if rec.pid is not None:
            return False
        if requested:
            # `up` asked for it: start now, a fresh streak
            rec.streak = 0
            return self._spawn(spec, rec, now, restart=False)
        if rec.next_start_at is None:
            rec.next_start_at = now  # wanted but not running and nothing planned: plan it
            return True
        if now >= rec.next_start_at:
            return self._spawn(spec, rec, now, restart=True)
        return False

    def _spawn(self, spec: ServiceSpec, rec: ServiceRecord, now: float, restart: bool) -> bool:
        proc = self._proc(spec)
        if restart:
            rec.restarts += 1
            banner = f"supervisor restart {rec.restarts} of {spec.name} after {rec.last_exit}"
        else:
            banner = f"starting {spec.name}"
        try:
            pid = proc.start(
                spec.argv,
                env=spec.env,
                cwd=Path(spec.cwd) if spec.cwd else None,
                banner=banner,
                die_with_parent=self.children_die_with_it,
            )
        except OSError as exc:
            rec.last_exit, rec.last_exit_pid, rec.last_exit_at = (
                f"failed to start: {exc}",
                None,
                now,
            )
            rec.streak += 1
            rec.next_start_at = now + self.policy.delay(rec.streak)
            rec.started_at = now
            log.error("%s failed to start: %s", spec.name, exc)
            return True
        rec.pid, rec.started_at, rec.next_start_at, rec.adopted = pid, now, None, False
        if restart:
            log.warning("%s restarted (pid %d), restart %d", spec.name, pid, rec.restarts)
        else:
            log.info("%s started (pid %d)", spec.name, pid)
        return True

    def _write(self, force: bool) -> None:
        now = time.time()
        if not force and now - self._written_at < HEARTBEAT_S:
            return
        self.link.write_state(SupervisorState(os.getpid(), now, dict(self.records)))
        self._written_at = now

    # -- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        log.info("supervisor (pid %d) watching %s", os.getpid(), self.link.spec_dir)
        self.link.write_main_pid(os.getpid())
        self.adopt()
        while not stop.is_set():
            try:
                self.step()
            except OSError:
                # a full disk or a vanished file must not end the supervision: try again
                log.exception("supervisor pass failed")
            stop.wait(self.poll_s)
        if self.children_die_with_it:
            log.info("supervisor stopping; SIGTERM to its services: %s", self._running_names())
        else:
            log.info("supervisor stopping; services left running: %s", self._running_names())
        self.link.remove_main_pid(os.getpid())

    def _running_names(self) -> str:
        names = [name for name, rec in self.records.items() if rec.pid is not None]
        return ", ".join(names) or "none"


def install_stop_signals(stop: threading.Event) -> None:
    def handler(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
