"""The files through which `iot-stack` and its supervisor daemon talk, under `<data-dir>/run/`.

`supervise/<name>.json` holds one wanted service's spec (argv, env, cwd, log): `up` writes it,
`down` removes it, and the supervisor keeps exactly those services running. `supervisor.json`
is the supervisor's state (pid, restarts, last exit of each service), read by `status`.
`supervisor.main-pid` is the running supervisor's pid as a plain number, for systemd's
`PIDFile=` (`iot-stack systemd`).
Both are replaced atomically (write to a temporary file, then rename), so a reader never sees
half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stack.supervision import ServiceRecord, ServiceSpec, SupervisorState

_POLL_S = 0.1


def _write_atomic(path: Path, data: dict[str, Any], mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # specs hold the service's environment: readable by the owner only
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    tmp.replace(path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


class SupervisorLink:
    """Read and write the supervisor's specs and state under one run dir."""

    def __init__(self, run_dir: Path) -> None:
        self.spec_dir = run_dir / "supervise"
        self.state_path = run_dir / "supervisor.json"
        self.main_pid_path = run_dir / "supervisor.main-pid"

    # -- specs: what should run (written by the launcher) --------------------------------------
    def request(self, spec: ServiceSpec) -> None:
        _write_atomic(self.spec_dir / f"{spec.name}.json", spec.to_json(), mode=0o600)

    def withdraw(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.spec_dir / f"{name}.json").unlink()

    def withdraw_all(self) -> None:
        for name in self.specs():
            self.withdraw(name)

    def specs(self) -> dict[str, ServiceSpec]:
        found: dict[str, ServiceSpec] = {}
        if not self.spec_dir.is_dir():
            return found
        for path in sorted(self.spec_dir.glob("*.json")):
            raw = _read_json(path)
            if raw is None:
                continue
            with contextlib.suppress(KeyError, TypeError, ValueError):
                spec = ServiceSpec.from_json(raw)
                found[spec.name] = spec
        return found

    def write_main_pid(self, pid: int) -> None:
        self.main_pid_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.main_pid_path.with_name(f".{self.main_pid_path.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{pid}\n")
        tmp.replace(self.main_pid_path)

    def remove_main_pid(self, pid: int) -> None:
        """Remove the plain pid file if it still names `pid` (not a successor's)."""
        with contextlib.suppress(OSError, ValueError):
            if int(self.main_pid_path.read_text()) == pid:
                self.main_pid_path.unlink()

    # -- state: what the supervisor saw (written by the supervisor) ----------------------------
    def write_state(self, state: SupervisorState) -> None:
        _write_atomic(self.state_path, state.to_json())

    def state(self) -> SupervisorState | None:
        raw = _read_json(self.state_path)
        if raw is None:
            return None
        try:
            return SupervisorState.from_json(raw)
        except (KeyError, TypeError, ValueError):
            return None

    def record(self, name: str) -> ServiceRecord | None:
        state = self.state()
        return state.services.get(name) if state is not None else None

    def wait_record(
        self, name: str, predicate: Callable[[ServiceRecord], bool], timeout: float
    ) -> ServiceRecord | None:
        """The service's record once `predicate(record)` holds, or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            rec = self.record(name)
            if rec is not None and predicate(rec):
                return rec
            if time.monotonic() > deadline:
                return None
            time.sleep(_POLL_S)
