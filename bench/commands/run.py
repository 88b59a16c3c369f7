"""One command benchmark run: set up the condition, send, measure, and gather the figures.

Composes the parts: the command path and devices (``processes``, ``bench.responder``), the
telemetry (``telemetry``), the commands (``sender``), the CPU window (``cpu_window``) and the
figures (``measure``); everything it started is stopped however the run ends.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.commands import broker_saves, measure
from bench.commands.cpu_window import CpuWindow, disturbance_note
from bench.commands.errors import BenchError
from bench.commands.options import HALF
from bench.commands.processes import Proc, start_command_path, start_sim
from bench.commands.result import Result
from bench.commands.sender import CommandSender
from bench.commands.stack_setup import Servers, bridge_settings, create_topics, run_topics
from bench.commands.telemetry import TelemetryMonitor, measure_max, start_paced
from bench.load import LoadGenerator
from bench.progress import say
from bench.responder import Responder, ResponderSpec
from bench.results import fmt_number, percentile
from commands.client import CommandClient

ROOT = Path(__file__).resolve().parents[2]
INGEST_RESULTS = ROOT / "bench" / "results" / "ingest.json"
THIS_PROCESS = "this process (commands, status reader)"


@dataclass
class Parts:
    """What a run has started; ``close`` stops all of it."""

    bridge: Proc | None = None
    cmd: Proc | None = None
    sim: Proc | None = None
    responder: Responder | None = None
    monitor: TelemetryMonitor | None = None
    load: LoadGenerator | None = None
    client: CommandClient | None = None

    def alive(self) -> None:
        """Raise BenchError when a process of the benchmark has died."""
        for p in (self.bridge, self.cmd, self.sim):
            if p is not None:
                p.check()
        if self.responder is not None and (why := self.responder.failed()):
            raise BenchError(why)

    def cpu_groups(self, servers: Servers) -> dict[str, Callable[[], list[int]]]:
        """The process groups whose CPU is measured; the bridge's comes first."""
        bridge, cmd = self.bridge, self.cmd
        groups: dict[str, Callable[[], list[int]]] = {
            "iot-bridge" if cmd is not None else "iot-bridge (with commands)": (
                lambda: [bridge.popen.pid] if bridge is not None else []
            ),
        }
        if cmd is not None:
            groups["iot-cmd serve"] = lambda: [cmd.popen.pid]
        groups["mosquitto"] = lambda: [p for p in [servers.mosquitto_pid()] if p]
        groups["kafka"] = lambda: [p for p in [servers.kafka_pid()] if p]
        if self.load is not None:
            load_pids = self.load.pids()
            groups["telemetry publishers"] = lambda: load_pids
        if self.responder is not None:
            resp_pids = self.responder.pids()
            groups["responder"] = lambda: resp_pids
        if (sim := self.sim) is not None:
            groups["iot-sim"] = lambda: [sim.popen.pid]
        me = os.getpid()
        groups[THIS_PROCESS] = lambda: [me]
        return groups

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.load is not None:
            self.load.kill()
        if self.monitor is not None:
            self.monitor.close()
        if self.responder is not None:
            self.responder.stop()
        if self.sim is not None:
            self.sim.stop(30, signal.SIGINT)
        for p in (self.cmd, self.bridge):
            if p is not None:
                p.stop()


@dataclass
class Condition:
    """The telemetry beside the commands: the rate offered and where it came from."""

    rate: float
    maximum: float | None = None
    measured: float | None = None
    recorded: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Window:
    """The measured window: its monotonic bounds, wall-clock start and what it cost."""

    t_start: float
    t_end: float
    started_wall: float
    cpu_s: dict[str, float | None]
    telemetry_in_kafka: int
    saves: dict[str, float | int] | None  # broker_saves.summary; None: not read


def _round(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def telemetry_condition(
    args: argparse.Namespace, servers: Servers, monitor: TelemetryMonitor
) -> Condition:
    """``--telemetry-rate``, or half the bridge's maximum (measured now, or recorded if higher)."""
    if args.telemetry_rate is not None:
        return Condition(rate=args.telemetry_rate)
    # The measured run doubles as the stack's warm-up. Its figure comes out below the ingest
    # benchmark's on a broker a minute old, so the higher of the two counts: the condition is
    # never eased by a cold start.
    measured, notes = measure_max(args, servers, monitor)
    recorded = measure.recorded_maximum(INGEST_RESULTS, args.telemetry_payload)
    maximum = max(measured, recorded or 0.0)
    rate = measure.half_of(maximum)
    say(
        f"bridge maximum {maximum:,.0f} msgs/s ({args.telemetry_payload} B, QoS 1; "
        f"measured now {measured:,.0f}, recorded by the ingest benchmark "
        f"{fmt_number(recorded, 0)}): telemetry at {rate:,.0f} msgs/s from now on"
    )
    return Condition(rate, maximum, measured, recorded, notes)


def start_devices(
    args: argparse.Namespace,
    servers: Servers,
    parts: Parts,
    *,
    devices: list[str],
    prefix: str,
    topics: dict[str, str],
    workdir: Path,
    total_time: float,
) -> None:
    """The command-answering devices: the raw responder, or iot-sim (``--responder sim``)."""
    if args.responder == "raw":
        parts.responder = Responder(
            ResponderSpec(
                servers.mqtt_host, servers.mqtt_port, devices, processes=args.responder_processes
            )
        )
        parts.responder.start()
        say(f"{len(devices):,} responder devices subscribed")
    else:
        parts.sim = start_sim(
            args, servers, prefix=prefix, topics=topics, workdir=workdir, total_time=total_time
        )


def measured_window(
    args: argparse.Namespace,
    servers: Servers,
    parts: Parts,
    sender: CommandSender,
    monitor: TelemetryMonitor,
) -> Window:
    """``--duration`` s of commands at ``--rate``, recorded, with the CPU used meanwhile."""
    cpu = CpuWindow(parts.cpu_groups(servers), alone=frozenset({THIS_PROCESS}))
    telemetry_before = monitor.latest()[1]
    saves = broker_saves.SaveWatch(servers.mosquitto_pid)
    saves.start()
    cpu.start()
    t_start = time.monotonic()
    started_wall = time.time()
    sender.drive(args.rate, args.duration, record=True)
    t_end = time.monotonic()
    cpu_used = cpu.stop()
    seen = saves.stop()
    telemetry_after = monitor.latest(after=t_end)[1]
    return Window(
        t_start,
        t_end,
        started_wall,
        cpu_used,
        telemetry_after - telemetry_before,
        broker_saves.summary(seen, t_end - t_start) if seen is not None else None,
    )


def run(args: argparse.Namespace, servers: Servers) -> Result:
    tag = uuid.uuid4().hex[:8]
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    notes: list[str] = []
    topics = run_topics(tag)
    create_topics(servers, topics, args.partitions)
    settings = bridge_settings(servers, tag, topics, args.setting)
    workdir = Path(tempfile.mkdtemp(prefix="cmd-rtt-"))
    say(f"logs under {workdir}")
    prefix = f"rtt{tag}"
    devices = [f"{prefix}-{i:05d}" for i in range(args.devices)]
    total_time = (
        (args.max_duration + args.warmup_timeout + args.warmup_load + args.duration)
        + args.drain_timeout
        + 120
    )
    parts = Parts()
    try:
        parts.bridge, parts.cmd = start_command_path(args.command_path, settings, workdir)
        say(f"command path ready ({args.command_path})")
        start_devices(
            args,
            servers,
            parts,
            devices=devices,
            prefix=prefix,
            topics=topics,
            workdir=workdir,
            total_time=total_time,
        )
        monitor = parts.monitor = TelemetryMonitor(
            servers.bootstrap, topics["topic_telemetry"], args.partitions
        )
        monitor.start()
        condition = telemetry_condition(args, servers, monitor)
        notes += condition.notes
        parts.load = start_paced(args, servers, monitor, condition.rate, total_time)

        client = parts.client = CommandClient(
            servers.bootstrap,
            topic_commands=topics["topic_commands"],
            topic_status=topics["topic_command_status"],
            topic_replies=topics["topic_command_replies"],
            linger_ms=1,
        )
        tail = client.tail_status()
        sender = CommandSender(client, tail, devices, parts.alive)
        sender.warm_up(args.warmup_timeout)
        say(f"warm-up done: {len(devices):,} devices answer")

        # Load warm-up, not measured: the same rate for --warmup-load seconds, so that Kafka's
        # JIT compiler (a fresh broker's C2 thread took ~70% of a core for the first ~30 s)
        # and every cache are past their start-up before the measured window.
        if args.warmup_load > 0:
            sender.drive(args.rate, args.warmup_load, record=False)
            say(f"load warm-up done: {args.warmup_load:.0f} s at {args.rate:.0f}/s")

        window = measured_window(args, servers, parts, sender, monitor)
        client.flush()
        send_end = time.time()
        sender.drain(args.drain_timeout)
        tail.close()
        achieved = monitor.rate(window.t_start, window.t_end)
        telemetry_published = telemetry_acked = 0
        if parts.load is not None:
            parts.load.stop()
            report = parts.load.finish()
            telemetry_published, telemetry_acked = report.published, report.acked
            if achieved is not None and achieved < 0.95 * condition.rate:
                notes.append(
                    f"telemetry reached only {achieved:,.0f} of the {condition.rate:,.0f} "
                    "msgs/s offered in the measured window"
                )
        responder_counts = parts.responder.counts() if parts.responder is not None else {}
        if note := disturbance_note(
            window.cpu_s, window.t_end - window.t_start, os.cpu_count() or 1
        ):
            notes.append(note)

        sent_at, finals = sender.sent_at, sender.finals
        last_final = max((t for _, t in finals.values()), default=send_end)
        rtts = measure.round_trips_ms(sent_at, finals)
        bridge_key = next(iter(window.cpu_s))
        return Result(
            started_at=started_at,
            command_path=args.command_path,
            responder=args.responder,
            devices=args.devices,
            target_rate=args.rate,
            duration_s=args.duration,
            warmup_load_s=args.warmup_load,
            sent=len(sent_at),
            succeeded=len(rtts),
            other_final=measure.other_finals(finals),
            missing=len(sent_at) - len(finals),
            completed_per_s=len(finals) / max(1e-9, last_final - window.started_wall),
            rtt_ms_p50=percentile(rtts, 50),
            rtt_ms_p90=percentile(rtts, 90),
            rtt_ms_p99=percentile(rtts, 99),
            rtt_ms_max=rtts[-1] if rtts else None,
            stages_ms=measure.stage_breakdown(sent_at, sender.marks, finals),
            telemetry_mode=HALF if args.telemetry_rate is None else "fixed",
            telemetry_max_msgs_per_s=_round(condition.maximum),
            telemetry_max_measured=_round(condition.measured),
            telemetry_max_recorded=condition.recorded,
            telemetry_rate=condition.rate,
            telemetry_achieved_msgs_per_s=_round(achieved),
            telemetry_in_kafka=window.telemetry_in_kafka,
            telemetry_payload_bytes=args.telemetry_payload,
            telemetry_devices=args.telemetry_devices,
            telemetry_published=telemetry_published,
            telemetry_acked=telemetry_acked,
            window_s=round(window.t_end - window.t_start, 3),
            mosquitto_saves=window.saves,
            cpu_s=window.cpu_s,
            bridge_cpu_s=window.cpu_s.get(bridge_key),
            responder_counts=responder_counts,
            notes=notes,
            settings=dict(args.setting),
            timeline=measure.build_timeline(
                sent_at,
                finals,
                monitor.published_between(window.t_start, window.t_end),
                window.started_wall - window.t_start,
            ),
        )
    finally:
        parts.close()
