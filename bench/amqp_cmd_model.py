"""The pure parts of `make bench-amqp`'s command phase (bench/amqp_cmd.py): its settings, the
pacing of the application's sends, the figures of a run and the docs' table. No I/O."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.http_api import percentile

OK_BODY = b'{"status": "ok", "result": "done"}'  # what each bench device answers


@dataclass(frozen=True)
class CommandSettings:
    """``devices`` AMQP devices, each with its own log-in and ``command`` link; the application
    sends ``rate`` commands/s in all, round robin, for ``seconds``; a command with no reply
    ``timeout_s`` after the last send is lost."""

    devices: int = 20
    rate: float = 50.0
    seconds: float = 20.0
    timeout_s: float = 35.0  # past the command path's 30 s reply timeout (stack_setup)
    credit: int = 50  # each device's command link

    def problems(self) -> list[str]:
        """What is wrong with these settings, one line each (none: fine)."""
        bad = []
        if self.devices <= 0:
            bad.append("--command-devices must be > 0")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            bad.append("--command-rate must be > 0")
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            bad.append("--command-seconds must be > 0")
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            bad.append("--command-timeout-s must be > 0")
        return bad

    @property
    def planned(self) -> int:
        """Commands the phase sends."""
        return max(1, int(self.rate * self.seconds))


def due(elapsed_s: float, rate: float, sent: int, planned: int) -> int:
    """Commands to send now so that ``rate``/s holds since the start (never past ``planned``)."""
    if elapsed_s <= 0:
        return 0
    return max(0, min(planned, int(elapsed_s * rate) + 1) - sent)


def device_of(seq: int, devices: int) -> int:
    """The device the ``seq``-th command goes to: round robin."""
    return seq % devices


def latency_summary(values_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank; NaN when empty) of ``values_ms``."""
    return {f"p{q}": percentile(values_ms, q) for q in (50, 95, 99)}


def _per_command_ms(cpu_s: float | None, count: int) -> float | None:
    return None if cpu_s is None or count <= 0 else cpu_s / count * 1000


def figures(
    *,
    settings: CommandSettings,
    sent_at: Mapping[str, float],
    device_at: Mapping[str, float],
    replied_at: Mapping[str, float],
    refused: int,
    bad_replies: int,
    send_span_s: float,
    cpu_amqp_s: float | None,
    cpu_command_path_s: float | None,
) -> dict[str, Any]:
    """One run's figures from the monotonic times (by command id) of the application's send,
    the device's receipt and the reply back at the application."""
    rtt = [(replied_at[c] - sent_at[c]) * 1000 for c in replied_at if c in sent_at]
    down = [(device_at[c] - sent_at[c]) * 1000 for c in device_at if c in sent_at]
    answered = len(rtt)
    total = len(sent_at)
    span = send_span_s if send_span_s > 0 else float("nan")
    rtt_q, down_q = latency_summary(rtt), latency_summary(down)
    # from the first send to the last reply: past send_span_s when replies fell behind
    last = max((t for c, t in replied_at.items() if c in sent_at), default=0.0)
    answered_span = last - min(sent_at.values(), default=0.0)
    return {
        "cmd_devices": settings.devices,
        "cmd_rate_asked": settings.rate,
        "cmd_sent": total,
        "cmd_per_s": total / span,
        "cmd_replied": answered,
        "cmd_replies_per_s": answered / answered_span if answered_span > 0 else float("nan"),
        "cmd_reply_span_s": answered_span if answered else float("nan"),
        "cmd_lost": total - answered - refused,
        "cmd_refused": refused,
        "cmd_bad_replies": bad_replies,
        "cmd_rtt_p50_ms": rtt_q["p50"],
        "cmd_rtt_p95_ms": rtt_q["p95"],
        "cmd_rtt_p99_ms": rtt_q["p99"],
        "cmd_down_p50_ms": down_q["p50"],
        "cmd_down_p99_ms": down_q["p99"],
        "cmd_amqp_cpu_ms_per_cmd": _per_command_ms(cpu_amqp_s, answered),
        "cmd_path_cpu_ms_per_cmd": _per_command_ms(cpu_command_path_s, answered),
    }


def _num(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def table(runs: Sequence[Mapping[str, Any]]) -> str:
    """docs/benchmarks.md's table of the command phase, one row per run, the load beside it."""
    lines = [
        "| run | load (1 min) | devices | commands/s asked / sent / replied"
        " | round trip p50 / p95 / p99 ms | lost / refused"
        " | CPU ms per command: iot-amqp / command path |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, run in enumerate(runs, 1):
        load = run.get("load_average") or [float("nan")]
        lines.append(
            f"| {i} | {_num(load[0], '.1f')} | {run['cmd_devices']} "
            f"| {_num(run['cmd_rate_asked'], '.0f')} / {_num(run['cmd_per_s'], '.1f')}"
            f" / {_num(run['cmd_replies_per_s'], '.1f')} "
            f"| {_num(run['cmd_rtt_p50_ms'], '.1f')} / {_num(run['cmd_rtt_p95_ms'], '.1f')}"
            f" / {_num(run['cmd_rtt_p99_ms'], '.1f')} "
            f"| {run['cmd_lost']} / {run['cmd_refused']} "
            f"| {_num(run['cmd_amqp_cpu_ms_per_cmd'], '.2f')}"
            f" / {_num(run['cmd_path_cpu_ms_per_cmd'], '.2f')} |"
        )
    return "\n".join(lines)
