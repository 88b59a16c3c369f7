"""The chaos matrix's names (pure): its services, its faults, which fault applies to which
service, and the `--services`/`--faults` selections with a clear error naming the valid ones."""

from __future__ import annotations

from collections.abc import Sequence

# the processes of `iot-stack up --console --analytics --devices N`, in the order of the matrix;
# the registry writer is no process of its own (it runs in iot-api and the `iot-devices` CLI):
# its faults are api's
SERVICES: tuple[str, ...] = (
    "mosquitto", "kafka", "bridge", "commands", "api", "analytics", "devices", "supervisor",
)  # fmt: skip
FAULTS: tuple[str, ...] = ("kill9", "stop30", "restart", "disk-full")
FAULT_HELP = {
    "kill9": "kill -9; the supervisor restarts it",
    "stop30": "SIGSTOP for 30 s (a hung process), then SIGCONT",
    "restart": "a clean restart: SIGTERM, the supervisor starts it again",
    "disk-full": "its data dir (a small tmpfs) filled for 30 s, then space returned",
}
DISK_SERVICES = frozenset({"kafka", "mosquitto"})  # the services with a data dir of their own


class ChaosUsageError(ValueError):
    """A bad `--services`/`--faults` value (the CLI exits 2 with it)."""


def select(text: str | None, valid: Sequence[str], what: str) -> list[str]:
    """The names of a comma-separated ``text`` (None, "" or "all": every valid one), in the
    order of ``valid``; ChaosUsageError naming the unknown ones and every valid one."""
    if text is None or text.strip() in ("", "all"):
        return list(valid)
    asked = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in asked if t not in valid]
    if unknown:
        raise ChaosUsageError(
            f"unknown {what} {', '.join(repr(u) for u in unknown)}: "
            f"valid {what}s are {', '.join(valid)} (or all)"
        )
    return [v for v in valid if v in asked]


def applies(service: str, fault: str) -> bool:
    """Whether ``fault`` is a cell of the matrix for ``service``."""
    if fault == "disk-full":
        return service in DISK_SERVICES
    if service == "supervisor":
        return fault in ("kill9", "stop30")  # `restart` of the supervisor is `up` again
    return True


def cells(services: Sequence[str], faults: Sequence[str]) -> list[tuple[str, str]]:
    """The (service, fault) cells to run, service by service."""
    return [(s, f) for s in services for f in faults if applies(s, f)]
