"""What the supervisor knows, as plain data: restart policy, service specs, per-service records.

The launcher (`iot-stack up`) and the supervisor daemon (`iot-stack supervise`) talk through
files under `<data-dir>/run/`: one spec per wanted service in `supervise/<name>.json` (written
by `up`, removed by `down`), and the supervisor's state in `supervisor.json` (restart counts,
last exit reasons, pending restarts), read by `iot-stack status`. This module only encodes and
decodes them and computes the backoff; the file I/O lives in `stack.supervisor_link`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RestartPolicy:
    """Exponential backoff: the n-th restart in a row waits initial * factor**(n-1), capped.

    A service that stayed up `stable_s` is healthy again: its next death restarts after
    `initial_s` once more. There is no give-up: a service the operator wants is retried forever
    (every retry is logged and counted), since most causes (Kafka away, port briefly held) heal.
    """

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 30.0
    stable_s: float = 60.0

    def __post_init__(self) -> None:
        if self.initial_s <= 0 or self.factor < 1 or self.max_s < self.initial_s:
            raise ValueError(f"bad restart policy {self}")

    def delay(self, failures_in_row: int) -> float:
        """Seconds to wait before restart number `failures_in_row` (1 = first) of a streak."""
        step = max(failures_in_row, 1) - 1
        return float(min(self.initial_s * self.factor**step, self.max_s))

    def streak_after_exit(self, streak: int, uptime_s: float) -> int:
        """The failure streak once a process that ran `uptime_s` died."""
        return 1 if uptime_s >= self.stable_s else streak + 1


@dataclass(frozen=True)
class ServiceSpec:
    """How to (re)start one service: what `up` asked the supervisor to keep running."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    log_path: str
    # changes on every `up` request: the supervisor starts a stopped service at once for it
    requested_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ServiceSpec:
        return cls(
            name=str(raw["name"]),
            argv=[str(a) for a in raw["argv"]],
            env={str(k): str(v) for k, v in dict(raw["env"]).items()},
            cwd=None if raw.get("cwd") is None else str(raw["cwd"]),
            log_path=str(raw["log_path"]),
            requested_at=float(raw["requested_at"]),
        )


@dataclass
class ServiceRecord:
    """What the supervisor tracks of one service between its loops (and shows to `status`)."""

    name: str
    pid: int | None = None
    started_at: float | None = None
    restarts: int = 0
    streak: int = 0
    last_exit: str | None = None
    last_exit_pid: int | None = None
    last_exit_at: float | None = None
    next_start_at: float | None = None  # set while waiting out a backoff
    adopted: bool = False  # found running when this supervisor started: not its child

    @property
    def state(self) -> str:
        if self.pid is not None:
            return "running"
        return "backoff" if self.next_start_at is not None else "stopped"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"state": self.state}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ServiceRecord:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass
class SupervisorState:
    """The supervisor's view, as written to `run/supervisor.json` after every change."""

    pid: int
    updated_at: float
    services: dict[str, ServiceRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "updated_at": self.updated_at,
            "services": {name: rec.to_json() for name, rec in self.services.items()},
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SupervisorState:
        services = {
            str(name): ServiceRecord.from_json(dict(rec))
            for name, rec in dict(raw.get("services") or {}).items()
        }
        return cls(pid=int(raw["pid"]), updated_at=float(raw["updated_at"]), services=services)


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    endpoint: str
    record: ServiceRecord | None = None  # the supervisor's, when the service is supervised

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def state(self) -> str:
        if self.pid is not None:
            return f"running (pid {self.pid})"
        rec = self.record
        if rec is not None and rec.next_start_at is not None:
            return f"restarting in {max(rec.next_start_at - time.time(), 0):.0f} s"
        return "stopped"

    @property
    def supervision(self) -> str:
        """Restart count and last exit, for `status` ('' when not supervised)."""
        rec = self.record
        if rec is None:
            return ""
        text = f"restarts {rec.restarts}"
        return f"{text} (last: {rec.last_exit})" if rec.last_exit else text
