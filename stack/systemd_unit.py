"""The systemd unit that runs the appliance on a production host (`iot-stack systemd`).

Pure: the unit's text from the stack's settings and the host's facts (user, interpreter, PATH)
the CLI gathers. What it encodes (docs/operations.md, "Running under systemd"):

- `ExecStart` is `iot-stack up` (`Type=forking`: `up` returns once every service is ready and
  leaves the supervisor running; `PIDFile=` names it, `run/supervisor.main-pid`), `ExecStop`
  is `iot-stack down` (stops the services newest first, Kafka cleanly, the supervisor last).
- `Restart=on-failure`: a supervisor that dies (a `kill -9`, the OOM killer) or an `up` that
  fails is started again after `RestartSec`, forever (`StartLimitIntervalSec=0`): the
  supervisor's own policy, no give-up. Its services die with it (SIGTERM through
  PR_SET_PDEATHSIG: Kafka and Mosquitto save their data), and the new `up` stops what is still
  shutting down before it starts the stack again.
- `KillMode=mixed`: systemd's SIGTERM goes to the supervisor alone (after `ExecStop` has
  stopped the services in order), and its final SIGKILL to whatever is left in the unit's
  cgroup after `TimeoutStopSec`: nothing outlives the unit, nothing is killed out of order.
- `WantedBy=multi-user.target` (`systemctl enable`): started again after a reboot.
- The settings as `Environment=` lines (`IOT_*`, the ones that differ from the defaults, and
  always the data dir), so `up` and `down` read the same; `EnvironmentFile=-/etc/default/<unit>`
  for the services' own `IOT_*` settings an operator adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from stack.settings import StackSettings

UNIT_NAME = "iot-stack"
OPEN_FILES = 262_144  # stack.process.SERVER_OPEN_FILES: what Mosquitto's devices need
# `down` waits up to 60 s for Kafka and up to 30 to 60 s for each other service
STOP_TIMEOUT_S = 300
RESTART_S = 5


@dataclass(frozen=True)
class UnitHost:
    """What the unit needs from the host it is written on."""

    python: str  # the interpreter with the project installed (its venv's)
    user: str
    group: str
    path: str  # PATH for mosquitto, java and the Spark scripts
    project_root: Path
    java_home: str = ""


def _quote(value: str) -> str:
    """One word of a unit file: quoted, with systemd's specifier `%` and quotes escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def _word(value: str) -> str:
    """A path as one word: bare when it needs no quotes (an executable, a directory)."""
    if any(ch.isspace() or ch in "\"\\'" for ch in value):
        return _quote(value)
    return value.replace("%", "%%")


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def settings_environment(settings: StackSettings) -> dict[str, str]:
    """The `IOT_*` variables that give these settings: those that differ from the defaults,
    and the data dir always (absolute)."""
    env: dict[str, str] = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if f.name == "data_dir" or value != f.default:
            env[f.metadata["env"]] = _env_value(value)
    return env


def render_unit(
    settings: StackSettings,
    host: UnitHost,
    name: str = UNIT_NAME,
    start_timeout_s: float | None = None,
) -> str:
    """The unit file's text."""
    data_dir = Path(settings.data_dir)
    env: Mapping[str, str] = {"PATH": host.path, "PYTHONUNBUFFERED": "1"}
    if host.java_home:
        env = {**env, "JAVA_HOME": host.java_home}
    env = {**env, **settings_environment(settings)}
    cli = f"{_word(host.python)} -m stack.cli"
    # `up` waits for each service in turn (up to start_timeout each): room for all of them
    start_timeout = max(900, int((start_timeout_s or 90) * 10))
    lines = [
        '# Written by `iot-stack systemd`; see docs/operations.md, "Running under systemd".',
        "[Unit]",
        f"Description=IoT telemetry appliance (iot-stack, data in {data_dir})",
        f"Documentation=file://{host.project_root / 'docs' / 'operations.md'}",
        "After=network-online.target",
        "Wants=network-online.target",
        "# retry forever, as the supervisor does its services: the usual causes heal",
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        "Type=forking",
        f"User={host.user}",
        f"Group={host.group}",
        f"WorkingDirectory={_word(str(host.project_root))}",
        *(f"Environment={_quote(f'{key}={value}')}" for key, value in env.items()),
        f"EnvironmentFile=-/etc/default/{name}",
        f"ExecStart={cli} up",
        f"ExecStop={cli} down",
        f"PIDFile={_word(str(data_dir / 'run' / 'supervisor.main-pid'))}",
        "Restart=on-failure",
        f"RestartSec={RESTART_S}",
        "# SIGTERM to the supervisor only (ExecStop stopped the services in order); the final",
        "# SIGKILL to everything left in the unit's cgroup",
        "KillMode=mixed",
        f"TimeoutStartSec={start_timeout}",
        f"TimeoutStopSec={STOP_TIMEOUT_S}",
        f"LimitNOFILE={OPEN_FILES}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)
