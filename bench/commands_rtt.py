"""Command round trip benchmark: ``python -m bench.commands_rtt`` (``make bench-commands``).

The issue's condition: command round-trip latency and commands/s with 1,000 online devices while
telemetry flows through the same bridge at HALF THE BRIDGE'S MAXIMUM. What runs (all on
loopback, all bounded in time):

1. Mosquitto + Kafka: a private stack on free ports (``StackConfig.servers_on_free_ports``), or
   ``--mqtt-port`` and ``--kafka-bootstrap`` of servers you run; fresh topics for this run.
2. The command path, ``--command-path separate`` (default, what ``iot-stack`` runs):
   ``iot-bridge`` with commands disabled plus ``iot-cmd serve`` as its own process (same
   ``IOT_*`` settings); ``inline``: ``iot-bridge`` with ``IOT_COMMANDS_ENABLED=1``.
3. ``--devices`` command-answering devices: ``bench/responder.py`` (raw-socket MQTT 5, PUBACK and
   reply in one write; default) or ``--responder sim`` (``iot-sim``, gmqtt, as before).
4. Telemetry: ``bench.load.LoadGenerator`` (raw-socket MQTT 3.1.1, QoS 1, 1 KiB, its own device
   ids). ``--telemetry-rate half`` (default) first measures the bridge's maximum in this run
   (publisher unpaced and window-bounded, delivered = the telemetry topic's Kafka high
   watermarks, ``--max-duration`` s with the first 2 s left out), then keeps the telemetry at
   half that rate from before the command warm-up to the end of the drain.
5. This process writes commands to ``iot.commands`` at ``--rate`` per second (first
   ``--warmup-load`` s not measured, then ``--duration`` s measured), spread over the devices,
   and follows ``iot.command-status``.

Round trip = from just before the command is handed to the Kafka producer to the moment this
process reads the command's ``succeeded`` status from Kafka: Kafka -> command path -> Mosquitto
-> device -> Mosquitto -> command path -> Kafka -> reader. Prints the result as JSON (p50 / p90 /
p99 / max, commands/s, the telemetry maximum and the rate achieved in the measured window, CPU
seconds of every process in the measured window, a stage breakdown); ``--out-dir`` writes
``commands.json`` and ``commands.md`` there. Exit 1 if any measured command got no final state.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.kafka_side import Watermarks
from bench.load import LoadError, LoadGenerator, LoadSpec
from bench.procstat import cpu_seconds
from bench.responder import Responder, ResponderError, ResponderSpec
from bench.results import percentile, steady_rate
from bridge.commands.client import CommandClient
from bridge.commands.model import State
from bridge.commands.status import decode_status
from stack.ports import free_port
from stack.topics import TopicSpec, ensure_topics

ROOT = Path(__file__).resolve().parents[1]
HALF = "half"
MAX_WARMUP_S = 2.0  # left out of the maximum's measurement
READY_TIMEOUT_S = 90.0
CMD_READY_LINE = "command path ready"
WARMUP_PING_MS = 5000
SIM_DEVICE_RATE = 0.2  # telemetry msgs/s of each iot-sim device (--responder sim)


class BenchError(Exception):
    """A process of the benchmark did not start, or the condition could not be set up."""


@dataclass
class Result:
    started_at: str
    command_path: str
    responder: str
    devices: int
    target_rate: float
    duration_s: float
    warmup_load_s: float
    sent: int
    succeeded: int
    other_final: dict[str, int]
    missing: int
    completed_per_s: float
    rtt_ms_p50: float | None
    rtt_ms_p90: float | None
    rtt_ms_p99: float | None
    rtt_ms_max: float | None
    stages_ms: dict[str, float | None]
    # the telemetry condition
    telemetry_mode: str  # "half" (of the maximum measured in this run) or "fixed"
    telemetry_max_msgs_per_s: float | None  # the higher of the two below
    telemetry_max_measured: float | None  # in this run, before the command phase
    telemetry_max_recorded: float | None  # bench/results/ingest.json (make bench)
    telemetry_rate: float  # offered during the command phase
    telemetry_achieved_msgs_per_s: float | None  # from Kafka watermarks, measured window
    telemetry_in_kafka: int  # telemetry records written during the measured window
    telemetry_payload_bytes: int
    telemetry_devices: int
    telemetry_published: int
    telemetry_acked: int
    # cost
    window_s: float
    cpu_s: dict[str, float | None]
    bridge_cpu_s: float | None
    responder_counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # --setting NAME=VALUE
    # per second of the measured window: what the telemetry and the round trips did then
    timeline: list[dict[str, float | int | None]] = field(default_factory=list)


# -- pure helpers ------------------------------------------------------------------------------


def parse_telemetry_rate(text: str) -> float | None:
    """``half`` -> None (half the maximum measured in the run); else a rate >= 0 in msgs/s."""
    if text.strip().lower() == HALF:
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number or 'half': {text!r}") from exc
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"telemetry rate must be >= 0, got {text!r}")
    return value


def build_timeline(
    sent_at: Mapping[str, float],
    finals: Mapping[str, tuple[State, float]],
    published: Sequence[tuple[float, int, int]],
    wall_offset: float,
) -> list[dict[str, float | int | None]]:
    """One row per second of the measured window (by the commands' send time): commands sent,
    their round-trip p99 and max (ms, finished ones), and the telemetry published and written
    to Kafka in that second. ``published``: (monotonic time, records in Kafka, published)
    samples; ``wall_offset`` turns their monotonic time into wall-clock time."""
    if not sent_at:
        return []
    start = min(sent_at.values())
    rtts: dict[int, list[float]] = {}
    sent: dict[int, int] = {}
    for cid, t in sent_at.items():
        second = int(t - start)
        sent[second] = sent.get(second, 0) + 1
        final = finals.get(cid)
        if final is not None:
            rtts.setdefault(second, []).append((final[1] - t) * 1000)
    rows: list[dict[str, float | int | None]] = []
    for second in sorted(sent):
        lo, hi = start + second, start + second + 1
        inside = [p for p in published if lo <= p[0] + wall_offset < hi]
        in_kafka = pub = None
        if len(inside) >= 2:
            span = inside[-1][0] - inside[0][0]
            if span > 0:
                in_kafka = round((inside[-1][1] - inside[0][1]) / span)
                pub = round((inside[-1][2] - inside[0][2]) / span)
        values = sorted(rtts.get(second, []))
        p99 = percentile(values, 99)
        rows.append(
            {
                "second": second,
                "commands": sent[second],
                "rtt_ms_p99": round(p99, 1) if p99 is not None else None,
                "rtt_ms_max": round(values[-1], 1) if values else None,
                "telemetry_published_per_s": pub,
                "telemetry_in_kafka_per_s": in_kafka,
            }
        )
    return rows


INGEST_RESULTS = ROOT / "bench" / "results" / "ingest.json"


def recorded_maximum(path: Path, payload_bytes: int) -> float | None:
    """The bridge's QoS 1 maximum (1,000 devices, one process) at ``payload_bytes`` in the
    ingest benchmark's recorded results (``make bench``), if there is one."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    rates = [
        float(r["msgs_per_s"])
        for r in doc.get("results", [])
        if r.get("contender") == "iot-bridge-qos1"
        and str(r.get("scenario", "")).startswith("throughput")
        and r.get("payload_bytes") == payload_bytes
        and r.get("processes") == 1
        and r.get("msgs_per_s")
    ]
    return max(rates) if rates else None


def half_of(maximum: float) -> float:
    """Half the maximum, rounded to 100 msgs/s (at least 100)."""
    return max(100.0, round(maximum / 2, -2))


def stage_breakdown(
    sent_at: Mapping[str, float],
    marks: Mapping[str, Mapping[str, int]],
    finals: Mapping[str, tuple[State, float]],
) -> dict[str, float | None]:
    """Where the round trip went, in ms.

    ``sent_at``: wall-clock seconds each command was handed to the producer; ``marks``: per
    command, the first status ``at`` (epoch ms, the command path's clock) of each state;
    ``finals``: the final state and when this process read it (wall-clock seconds).
    """

    def stage(first: str, second: str, q: float) -> float | None:
        values = [float(m[second] - m[first]) for m in marks.values() if first in m and second in m]
        return percentile(values, q)

    to_path = [
        float(m["accepted"]) - sent_at[cid] * 1000
        for cid, m in marks.items()
        if "accepted" in m and cid in sent_at
    ]
    from_path = [
        seen * 1000 - marks[cid]["succeeded"]
        for cid, (_state, seen) in finals.items()
        if "succeeded" in marks.get(cid, {})
    ]
    return {
        "kafka_to_command_path_p50": percentile(to_path, 50),
        "kafka_to_command_path_p99": percentile(to_path, 99),
        "accepted_to_sent_p50": stage("accepted", "sent", 50),
        "accepted_to_sent_p99": stage("accepted", "sent", 99),
        "sent_to_delivered_p50": stage("sent", "delivered", 50),
        "sent_to_delivered_p99": stage("sent", "delivered", 99),
        "sent_to_succeeded_p50": stage("sent", "succeeded", 50),
        "sent_to_succeeded_p99": stage("sent", "succeeded", 99),
        "status_to_reader_p50": percentile(from_path, 50),
        "status_to_reader_p99": percentile(from_path, 99),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render_markdown(doc: Mapping[str, Any]) -> str:
    """``commands.md``: the condition, the verdict, the figures, the cost, the machine."""
    r = doc["result"]
    m = doc.get("machine", {})
    target_ok = (
        r["rtt_ms_p99"] is not None
        and r["rtt_ms_p99"] < 100
        and r["missing"] == 0
        and r["completed_per_s"] >= 0.95 * r["target_rate"]
    )
    tmax = r["telemetry_max_msgs_per_s"]
    if r["telemetry_mode"] == HALF:
        condition = (
            f"telemetry at half the bridge's maximum ({_fmt(tmax, 0)} msgs/s: the higher of "
            f"{_fmt(r.get('telemetry_max_measured'), 0)} measured in this run and "
            f"{_fmt(r.get('telemetry_max_recorded'), 0)} recorded by the ingest benchmark) -> "
            f"offered {_fmt(r['telemetry_rate'], 0)} msgs/s"
        )
    else:
        condition = f"telemetry at a fixed {_fmt(r['telemetry_rate'], 0)} msgs/s"
    lines = [
        "# Command round-trip benchmark",
        "",
        f"Run {doc.get('started_at', '?')} -> {doc.get('finished_at', '?')} "
        f"({_fmt(doc.get('wall_s'))} s wall), `python -m bench.commands_rtt "
        f"{' '.join(doc.get('argv', []))}`.",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}, Python "
        f"{m.get('python', '?')}; {m.get('mosquitto', '?')}; {m.get('kafka', '?')}; "
        f"librdkafka {m.get('librdkafka', '?')}. Load average before: "
        f"{' '.join(m.get('loadavg_before', []))}, after: {' '.join(m.get('loadavg_after', []))}.",
        "",
        f"Condition: {r['devices']:,} online devices ({r['responder']} responder), commands at "
        f"{_fmt(r['target_rate'], 0)}/s for {_fmt(r['duration_s'], 0)} s measured (after "
        f"{_fmt(r['warmup_load_s'], 0)} s unmeasured at the same rate), command path "
        f"`{r['command_path']}`; {condition}, {r['telemetry_payload_bytes']:,} B payloads from "
        f"{r['telemetry_devices']:,} other devices at QoS 1.",
        "",
        f"- Target p99 < 100 ms at {_fmt(r['target_rate'], 0)} commands/s: "
        + ("**met**" if target_ok else "**missed**")
        + f" (p99 {_fmt(r['rtt_ms_p99'])} ms, {_fmt(r['completed_per_s'], 0)} commands/s "
        f"completed, {r['missing']:,} without a final state).",
        f"- Telemetry achieved in the measured window: "
        f"{_fmt(r['telemetry_achieved_msgs_per_s'], 0)} msgs/s into Kafka "
        f"({r['telemetry_in_kafka']:,} records)"
        + (
            f" = {r['telemetry_achieved_msgs_per_s'] / tmax:.2f} of the maximum"
            if tmax and r["telemetry_achieved_msgs_per_s"] is not None
            else ""
        )
        + ".",
        "",
        "## Round trip (send to `succeeded` read back from Kafka)",
        "",
        "| sent | succeeded | other final | missing | commands/s "
        "| p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {r['sent']:,} | {r['succeeded']:,} | "
        f"{', '.join(f'{k} {v}' for k, v in r['other_final'].items()) or '0'} | "
        f"{r['missing']:,} | {_fmt(r['completed_per_s'], 0)} | {_fmt(r['rtt_ms_p50'])} | "
        f"{_fmt(r['rtt_ms_p90'])} | {_fmt(r['rtt_ms_p99'])} | {_fmt(r['rtt_ms_max'])} |",
        "",
        "## Stage breakdown (ms)",
        "",
        "Status `at` times are the command path's clock; the reader's are this process's "
        "(same machine).",
        "",
        "| stage | ms |",
        "|---|---|",
        *(f"| {k} | {_fmt(v)} |" for k, v in r["stages_ms"].items()),
        "",
        f"## CPU seconds in the measured window ({_fmt(r['window_s'])} s; "
        f"{m.get('cores', '?')} cores = {_fmt((m.get('cores') or 0) * r['window_s'])} CPU s)",
        "",
        "| process | CPU s | cores busy |",
        "|---|---|---|",
        *(
            f"| {k} | {_fmt(v, 2)} | "
            f"{_fmt(v / r['window_s'] if v is not None and r['window_s'] else None, 2)} |"
            for k, v in r["cpu_s"].items()
        ),
        "",
    ]
    if r["responder_counts"]:
        lines += [
            "Responder: " + ", ".join(f"{k} {v:,}" for k, v in r["responder_counts"].items()) + ".",
            "",
        ]
    if r["notes"]:
        lines += ["Notes:", "", *(f"- {n}" for n in r["notes"]), ""]
    return "\n".join(lines)


# -- processes ---------------------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def tree_cpu_seconds(pids: list[int], children: Mapping[int, list[int]]) -> float | None:
    """CPU seconds of the processes and all their descendants (None if none is alive)."""
    total = 0.0
    found = False
    todo = list(pids)
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        value = cpu_seconds(pid)
        if value is not None:
            total += value
            found = True
        todo.extend(children.get(pid, []))
    return total if found else None


MACHINE = "whole machine (/proc/stat, any process)"


def machine_busy_seconds() -> float | None:
    """CPU seconds all cores have spent not idle since boot (None if /proc/stat is unreadable)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu":
        return None
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]
    return busy / os.sysconf("SC_CLK_TCK")


def disturbance_note(cpu: Mapping[str, float | None], window_s: float, cores: int) -> str | None:
    """A note when processes other than the benchmark's used over 10% of the machine."""
    machine, ours = cpu.get(MACHINE), cpu.get("total")
    if machine is None or ours is None or window_s <= 0:
        return None
    other = machine - ours
    if other <= 0.10 * cores * window_s:
        return None
    return (
        f"DISTURBED? work outside the benchmark's processes (other users, the kernel) used "
        f"{other:.1f} CPU s of the {cores * window_s:.1f} "
        f"available in the measured window ({other / (cores * window_s):.0%} of the machine)"
    )


class CpuWindow:
    """CPU seconds used by named groups of processes between two marks.

    A group counts its processes' descendants too (iot-sim's worker processes, a launcher's
    child), except the groups named in ``alone`` (this process: its children are the others).
    """

    def __init__(
        self, groups: Mapping[str, Callable[[], list[int]]], alone: frozenset[str] = frozenset()
    ) -> None:
        self.groups = dict(groups)
        self.alone = alone
        self._before: dict[str, float | None] = {}

    def _read(self) -> dict[str, float | None]:
        children = _children_map()
        out = {
            name: tree_cpu_seconds(get(), {} if name in self.alone else children)
            for name, get in self.groups.items()
        }
        out[MACHINE] = machine_busy_seconds()
        return out

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float | None]:
        after = self._read()
        out: dict[str, float | None] = {}
        for name, value in after.items():
            before = self._before.get(name)
            out[name] = (
                round(value - before, 3) if value is not None and before is not None else None
            )
        machine = out.pop(MACHINE)
        known = [v for v in out.values() if v is not None]
        out["total"] = round(sum(known), 3) if known else None
        out[MACHINE] = machine  # everything on the machine, other users' work included
        return out


class TelemetryMonitor:
    """Samples the telemetry topic's record count (Kafka high watermarks) every ``interval`` s
    in a thread; feeds the followed load generator's window with what was delivered."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.05):
        self._wm = Watermarks(bootstrap, topic, partitions)
        self.interval = interval
        self._lock = threading.Lock()
        self.samples: list[tuple[float, int]] = []  # (time.monotonic(), records)
        # (time.monotonic(), records in Kafka, published by the followed load) for the timeline
        self.published: list[tuple[float, int, int]] = []
        self._load: LoadGenerator | None = None
        self._base = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self.latest(after=time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            count = self._wm.count()
            now = time.monotonic()
            with self._lock:
                self.samples.append((now, count))
                load, base = self._load, self._base
            if load is not None:
                load.set_delivered(count - base)
                with self._lock:
                    self.published.append((now, count - base, load.total_published()))
            self._stop.wait(self.interval)

    def latest(self, after: float | None = None, timeout: float = 30.0) -> tuple[float, int]:
        """The newest sample (taken after monotonic time ``after``, waiting for it if given)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self.samples and (after is None or self.samples[-1][0] > after):
                    return self.samples[-1]
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise BenchError("the telemetry topic's watermarks could not be read")
            time.sleep(self.interval / 2)

    def follow(self, load: LoadGenerator | None) -> int:
        """Feed ``load`` (not yet publishing) from now on; returns the count it starts from."""
        _t, base = self.latest(after=time.monotonic())
        with self._lock:
            self._load, self._base = load, base
        return base

    def published_between(self, start: float, end: float) -> list[tuple[float, int, int]]:
        with self._lock:
            return [row for row in self.published if start <= row[0] <= end]

    def rate(self, start: float, end: float) -> float | None:
        """Records/s written between monotonic times ``start`` and ``end``."""
        with self._lock:
            samples = list(self.samples)
        return steady_rate(samples, start, end)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._wm.close()


def _http_ready(port: int) -> bool | None:
    """True: /readyz answered 200; False: answered otherwise; None: nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return int(resp.status) == 200
    except urllib.error.HTTPError:
        return False
    except (urllib.error.URLError, OSError):
        return None


def _log_tail(path: Path) -> str:
    try:
        return path.read_bytes()[-2000:].decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        if self.popen.poll() is not None:
            raise BenchError(
                f"{self.name} exited with {self.popen.returncode}:\n{_log_tail(self.log)}"
            )

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            return None


def _spawn(name: str, argv: list[str], env: dict[str, str], log: Path) -> Proc:
    with log.open("wb") as out:
        popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    return Proc(name, popen, log)


def _wait_until(proc: Proc, ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        proc.check()
        if time.monotonic() > deadline:
            raise BenchError(f"{proc.name}: {what} not within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.1)


def _has_setting(name: str) -> bool:
    from bridge.config import BridgeConfig

    return name in {f.name for f in dataclasses.fields(BridgeConfig)}


def start_command_path(
    mode: str, settings: dict[str, Any], workdir: Path
) -> tuple[Proc, Proc | None]:
    """``iot-bridge`` (+ ``iot-cmd serve`` when ``separate``), both ready."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    base["PYTHONUNBUFFERED"] = "1"

    def env_of(extra: Mapping[str, Any]) -> dict[str, str]:
        merged = {**settings, **extra}
        return base | {"IOT_" + k.upper(): str(v) for k, v in merged.items()}

    bridge_port = free_port()
    cmd_http = _has_setting("command_http_port")
    cmd_http_port = free_port() if cmd_http else 0
    extra_http = {"command_http_port": cmd_http_port} if cmd_http else {}
    bridge = _spawn(
        "iot-bridge",
        [sys.executable, "-m", "bridge.cli"],
        env_of(
            {
                "http_port": bridge_port,
                "commands_enabled": "1" if mode == "inline" else "0",
                **extra_http,
            }
        ),
        workdir / "bridge.log",
    )
    cmd: Proc | None = None
    try:
        if mode == "separate":
            cmd = _spawn(
                "iot-cmd serve",
                [sys.executable, "-m", "bridge.commands.cli", "serve"],
                env_of({"http_port": free_port(), "commands_enabled": "1", **extra_http}),
                workdir / "command-path.log",
            )
        _wait_until(bridge, lambda: _http_ready(bridge_port) is True, "/readyz answering 200")
        if cmd is not None:
            cmd_proc = cmd
            line_seen_at: list[float] = []

            def cmd_ready() -> bool:
                if cmd_http:
                    state = _http_ready(cmd_http_port)
                    if state is True:
                        return True
                    if state is False:
                        return False
                # no HTTP endpoint (yet): the stderr line, after 5 s of no listener on the port
                if CMD_READY_LINE in cmd_proc.log.read_text(errors="replace"):
                    if not cmd_http:
                        return True
                    if not line_seen_at:
                        line_seen_at.append(time.monotonic())
                    return time.monotonic() - line_seen_at[0] > 5
                return False

            _wait_until(cmd_proc, cmd_ready, "readiness")
    except BaseException:
        for p in (cmd, bridge):
            if p is not None:
                p.stop(10)
        raise
    return bridge, cmd


@dataclass
class Servers:
    mqtt_host: str
    mqtt_port: int
    bootstrap: str
    mosquitto_pid: Callable[[], int | None] = lambda: None
    kafka_pid: Callable[[], int | None] = lambda: None


def start_sim(
    args: argparse.Namespace,
    servers: Servers,
    *,
    prefix: str,
    topics: Mapping[str, str],
    workdir: Path,
    total_time: float,
) -> Proc:
    """``iot-sim run`` as the answering devices.

    Each simulated device also sends telemetry, SIM_DEVICE_RATE msgs/s: a device with nothing
    left to send ends its run and disconnects, so the rate must keep one due every few seconds
    until the end (a fleet of 1,000 adds 200 msgs/s, counted in the telemetry figures).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    argv = [
        sys.executable, "-m", "device_sim.cli", "run",
        "--devices", str(args.devices),
        "--rate", str(SIM_DEVICE_RATE),
        "--duration", str(int(total_time)),
        "--reply-latency-ms", "0",
        "--device-prefix", prefix,
        "--groups", "1",
        "--connect-rate", "1000",
        "--session-expiry-s", "0",
        "--no-progress",
        "--no-offsets",
        "--mqtt-host", servers.mqtt_host,
        "--mqtt-port", str(servers.mqtt_port),
        "--kafka-bootstrap", servers.bootstrap,
        "--topic-telemetry", topics["topic_telemetry"],
        "--topic-dlq", topics["topic_dlq"],
        "--runs-dir", str(workdir / "runs"),
        "--processes", str(args.sim_processes),
    ]  # fmt: skip
    return _spawn("iot-sim", argv, env, workdir / "sim.log")


# -- the run -----------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measure_max(
    args: argparse.Namespace, servers: Servers, monitor: TelemetryMonitor
) -> tuple[float, list[str]]:
    """The bridge's telemetry maximum: unpaced, window-bounded publishers, Kafka watermarks."""
    notes: list[str] = []
    spec = LoadSpec(
        host=servers.mqtt_host,
        port=servers.mqtt_port,
        devices=args.telemetry_devices,
        payload_bytes=args.telemetry_payload,
        qos=1,
        duration_s=args.max_duration,
        rate=None,
        window=args.telemetry_window,
        processes=args.telemetry_processes,
    )
    load = LoadGenerator(spec)
    load.start()
    try:
        base = monitor.follow(load)
        t0 = time.monotonic()
        load.go()
        report = load.finish(timeout=args.max_duration + 120)
    finally:
        load.kill()
    # drain: the bridge has at most the window left to write
    last, last_change = -1, time.monotonic()
    while True:
        _t, count = monitor.latest(after=time.monotonic())
        done = count - base
        if done >= report.published:
            break
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > 20:
            notes.append(f"maximum run: delivery stopped at {done:,} of {report.published:,}")
            break
    monitor.follow(None)
    rate = monitor.rate(t0 + MAX_WARMUP_S, t0 + args.max_duration)
    if not rate:
        raise BenchError("the bridge delivered no telemetry while measuring its maximum")
    if report.acked < report.published:
        notes.append(f"maximum run: Mosquitto acked {report.acked:,} of {report.published:,}")
    return rate, notes


def run(args: argparse.Namespace, servers: Servers) -> Result:
    tag = uuid.uuid4().hex[:8]
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    notes: list[str] = []
    topics = {
        "topic_telemetry": f"bench.telemetry.{tag}",
        "topic_events": f"bench.events.{tag}",
        "topic_dlq": f"bench.dlq.{tag}",
        "topic_presence": f"bench.presence.{tag}",
        "topic_commands": f"bench.commands.{tag}",
        "topic_command_status": f"bench.command-status.{tag}",
        "topic_command_replies": f"bench.command-replies.{tag}",
        "topic_commands_dlq": f"bench.commands-dlq.{tag}",
    }
    compacted = {"topic_presence", "topic_command_status"}
    ensure_topics(
        servers.bootstrap,
        [TopicSpec(name, compacted=key in compacted) for key, name in topics.items()],
        args.partitions,
    )
    settings: dict[str, Any] = {
        "mqtt_host": servers.mqtt_host,
        "mqtt_port": servers.mqtt_port,
        "kafka_bootstrap": servers.bootstrap,
        "mqtt_client_id": f"bench-bridge-{tag}",
        "command_mqtt_client_id": f"bench-cmd-{tag}",
        "command_group_id": f"bench-cmd-{tag}",
        # no session outlives the run: a dead bridge's persistent session would keep queueing
        # all telemetry in Mosquitto (and its autosave would write it every few seconds)
        "mqtt_session_expiry_s": 0,
        "command_timeout_ms": 30000,
        "log_format": "json",
        "log_level": "WARNING",
        **topics,
        **dict(args.setting),
    }
    workdir = Path(tempfile.mkdtemp(prefix="cmd-rtt-"))
    _say(f"logs under {workdir}")
    prefix = f"rtt{tag}"
    devices = [f"{prefix}-{i:05d}" for i in range(args.devices)]
    total_time = (
        (args.max_duration + args.warmup_timeout + args.warmup_load + args.duration)
        + args.drain_timeout
        + 120
    )
    bridge: Proc | None = None
    cmd: Proc | None = None
    sim: Proc | None = None
    responder: Responder | None = None
    monitor: TelemetryMonitor | None = None
    load: LoadGenerator | None = None
    client: CommandClient | None = None
    try:
        bridge, cmd = start_command_path(args.command_path, settings, workdir)
        _say(f"command path ready ({args.command_path})")
        if args.responder == "raw":
            responder = Responder(
                ResponderSpec(
                    servers.mqtt_host,
                    servers.mqtt_port,
                    devices,
                    processes=args.responder_processes,
                )
            )
            responder.start()
            _say(f"{len(devices):,} responder devices subscribed")
        else:
            sim = start_sim(
                args,
                servers,
                prefix=prefix,
                topics=topics,
                workdir=workdir,
                total_time=total_time,
            )
        monitor = TelemetryMonitor(servers.bootstrap, topics["topic_telemetry"], args.partitions)
        monitor.start()

        maximum: float | None = None
        measured_max = recorded_max = None
        if args.telemetry_rate is None:
            # The measured run doubles as the stack's warm-up. Its figure comes out below the
            # ingest benchmark's on a broker a minute old, so the higher of the two counts:
            # the condition is never eased by a cold start.
            measured_max, max_notes = measure_max(args, servers, monitor)
            notes += max_notes
            recorded_max = recorded_maximum(INGEST_RESULTS, args.telemetry_payload)
            maximum = max(measured_max, recorded_max or 0.0)
            telemetry_rate = half_of(maximum)
            _say(
                f"bridge maximum {maximum:,.0f} msgs/s ({args.telemetry_payload} B, QoS 1; "
                f"measured now {measured_max:,.0f}, recorded by the ingest benchmark "
                f"{_fmt(recorded_max, 0)}): telemetry at {telemetry_rate:,.0f} msgs/s from now on"
            )
        else:
            telemetry_rate = args.telemetry_rate
        # the paced phase needs no fine curve: fewer watermark requests on the shared Kafka
        monitor.interval = 0.1
        if telemetry_rate > 0:
            load = LoadGenerator(
                LoadSpec(
                    host=servers.mqtt_host,
                    port=servers.mqtt_port,
                    devices=args.telemetry_devices,
                    payload_bytes=args.telemetry_payload,
                    qos=1,
                    duration_s=total_time,
                    rate=telemetry_rate,
                    window=args.telemetry_window,
                    processes=args.telemetry_processes,
                )
            )
            load.start()
            monitor.follow(load)
            load.go()

        client = CommandClient(
            servers.bootstrap,
            topic_commands=topics["topic_commands"],
            topic_status=topics["topic_command_status"],
            topic_replies=topics["topic_command_replies"],
            linger_ms=1,
        )
        tail = client.tail_status()

        def alive() -> None:
            for p in (bridge, cmd, sim):
                if p is not None:
                    p.check()
            if responder is not None and (why := responder.failed()):
                raise BenchError(why)

        # warm-up: every device answers once (all connected, command path consuming). A ping
        # lives one attempt of WARMUP_PING_MS: a device that was not subscribed yet gets a new
        # ping in the next round, and no stale ping is redelivered into the measured window.
        unanswered = set(devices)
        last_status: dict[str, str] = {}
        deadline = time.monotonic() + args.warmup_timeout
        while unanswered and time.monotonic() < deadline:
            round_ids = {
                client.send(
                    d, "ping", {}, timeout_ms=WARMUP_PING_MS, max_attempts=1, flush=False
                ): d
                for d in unanswered
            }
            client.flush()
            while round_ids and time.monotonic() < deadline:
                for msg in tail.poll(0.2):
                    status = decode_status(msg.key(), msg.value())
                    if status is None:
                        continue
                    if status.command_id in round_ids:
                        last_status[round_ids[status.command_id]] = (
                            f"{status.state.value} attempt {status.attempt} {status.detail or ''}"
                        ).strip()
                    if not status.final:
                        continue
                    device = round_ids.pop(status.command_id, None)
                    if device is not None and status.state is State.SUCCEEDED:
                        unanswered.discard(device)
                alive()
            if unanswered:
                _say(f"warm-up: {len(unanswered):,} devices did not answer yet, pinging again")
        if unanswered:
            some = sorted(unanswered)[:5]
            raise BenchError(
                f"{len(unanswered)} devices did not answer the warm-up commands; e.g. "
                + ", ".join(f"{d}: {last_status.get(d, 'no status')}" for d in some)
            )
        _say(f"warm-up done: {len(devices):,} devices answer")

        sent_at: dict[str, float] = {}
        finals: dict[str, tuple[State, float]] = {}
        marks: dict[str, dict[str, int]] = {}

        def observe(msgs: list[Any]) -> None:
            seen = time.time()
            for msg in msgs:
                status = decode_status(msg.key(), msg.value())
                if status is None or status.command_id not in sent_at:
                    continue
                marks.setdefault(status.command_id, {}).setdefault(status.state.value, status.at)
                if status.final:
                    finals[status.command_id] = (status.state, seen)

        interval = 0.01
        per_tick = args.rate * interval
        counter = 0

        def drive(seconds: float, record: bool) -> None:
            """Send at ``--rate`` for ``seconds``; only recorded commands are measured."""
            nonlocal counter
            assert client is not None
            credit = 0.0
            next_tick = time.monotonic()
            end_send = next_tick + seconds
            next_check = next_tick + 1.0
            while time.monotonic() < end_send:
                now = time.monotonic()
                if now >= next_tick:
                    credit += per_tick
                    while credit >= 1:
                        cid = uuid.uuid4().hex
                        if record:
                            sent_at[cid] = time.time()
                        client.send(
                            devices[counter % len(devices)],
                            "set",
                            {"i": counter},
                            command_id=cid,
                            flush=False,
                        )
                        counter += 1
                        credit -= 1
                    next_tick += interval
                if now >= next_check:
                    alive()
                    next_check = now + 1.0
                observe(tail.poll(0))
                pause = next_tick - time.monotonic()
                if pause > 0:
                    observe(tail.poll(min(pause, interval)))

        # Load warm-up, not measured: the same rate for --warmup-load seconds, so that Kafka's
        # JIT compiler (a fresh broker's C2 thread took ~70% of a core for the first ~30 s)
        # and every cache are past their start-up before the measured window.
        if args.warmup_load > 0:
            drive(args.warmup_load, record=False)
            _say(f"load warm-up done: {args.warmup_load:.0f} s at {args.rate:.0f}/s")

        groups: dict[str, Callable[[], list[int]]] = {
            "iot-bridge" if cmd is not None else "iot-bridge (with commands)": (
                lambda: [bridge.popen.pid] if bridge is not None else []
            ),
        }
        if cmd is not None:
            groups["iot-cmd serve"] = lambda: [cmd.popen.pid]
        groups["mosquitto"] = lambda: [p for p in [servers.mosquitto_pid()] if p]
        groups["kafka"] = lambda: [p for p in [servers.kafka_pid()] if p]
        if load is not None:
            load_pids = load.pids()
            groups["telemetry publishers"] = lambda: load_pids
        if responder is not None:
            resp_pids = responder.pids()
            groups["responder"] = lambda: resp_pids
        if sim is not None:
            groups["iot-sim"] = lambda: [sim.popen.pid]
        me = os.getpid()
        this = "this process (commands, status reader)"
        groups[this] = lambda: [me]
        cpu = CpuWindow(groups, alone=frozenset({this}))
        telemetry_before = monitor.latest()[1]
        cpu.start()
        t_start = time.monotonic()
        started_wall = time.time()
        drive(args.duration, record=True)
        t_end = time.monotonic()
        cpu_used = cpu.stop()
        telemetry_after = monitor.latest(after=t_end)[1]
        client.flush()
        send_end = time.time()
        drain_deadline = time.monotonic() + args.drain_timeout
        while len(finals) < len(sent_at) and time.monotonic() < drain_deadline:
            observe(tail.poll(0.05))
        last_final = max((t for _, t in finals.values()), default=send_end)
        tail.close()
        achieved = monitor.rate(t_start, t_end)
        telemetry_published = telemetry_acked = 0
        if load is not None:
            load.stop()
            report = load.finish()
            telemetry_published, telemetry_acked = report.published, report.acked
            if telemetry_rate and achieved is not None and achieved < 0.95 * telemetry_rate:
                notes.append(
                    f"telemetry reached only {achieved:,.0f} of the {telemetry_rate:,.0f} "
                    "msgs/s offered in the measured window"
                )
        responder_counts = responder.counts() if responder is not None else {}
        if note := disturbance_note(cpu_used, t_end - t_start, os.cpu_count() or 1):
            notes.append(note)

        rtts = sorted(
            (seen - sent_at[cid]) * 1000
            for cid, (state, seen) in finals.items()
            if state is State.SUCCEEDED
        )
        timeline = build_timeline(
            sent_at,
            finals,
            monitor.published_between(t_start, t_end),
            started_wall - t_start,
        )
        other: dict[str, int] = {}
        for state, _ in finals.values():
            if state is not State.SUCCEEDED:
                other[state.value] = other.get(state.value, 0) + 1
        bridge_key = next(iter(groups))
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
            other_final=other,
            missing=len(sent_at) - len(finals),
            completed_per_s=len(finals) / max(1e-9, last_final - started_wall),
            rtt_ms_p50=percentile(rtts, 50),
            rtt_ms_p90=percentile(rtts, 90),
            rtt_ms_p99=percentile(rtts, 99),
            rtt_ms_max=rtts[-1] if rtts else None,
            stages_ms=stage_breakdown(sent_at, marks, finals),
            telemetry_mode=HALF if args.telemetry_rate is None else "fixed",
            telemetry_max_msgs_per_s=round(maximum, 1) if maximum is not None else None,
            telemetry_max_measured=round(measured_max, 1) if measured_max is not None else None,
            telemetry_max_recorded=recorded_max,
            telemetry_rate=telemetry_rate,
            telemetry_achieved_msgs_per_s=round(achieved, 1) if achieved is not None else None,
            telemetry_in_kafka=telemetry_after - telemetry_before,
            telemetry_payload_bytes=args.telemetry_payload,
            telemetry_devices=args.telemetry_devices,
            telemetry_published=telemetry_published,
            telemetry_acked=telemetry_acked,
            window_s=round(t_end - t_start, 3),
            cpu_s=cpu_used,
            bridge_cpu_s=cpu_used.get(bridge_key),
            responder_counts=responder_counts,
            notes=notes,
            settings=dict(args.setting),
            timeline=timeline,
        )
    finally:
        if client is not None:
            client.close()
        if load is not None:
            load.kill()
        if monitor is not None:
            monitor.close()
        if responder is not None:
            responder.stop()
        if sim is not None and sim.popen.poll() is None:
            sim.popen.send_signal(signal.SIGINT)
            try:
                sim.popen.wait(30)
            except subprocess.TimeoutExpired:
                sim.popen.kill()
                sim.popen.wait()
        for p in (cmd, bridge):
            if p is not None:
                p.stop()


@contextlib.contextmanager
def own_stack(data_dir: Path, partitions: int) -> Iterator[Servers]:
    from stack.config import StackConfig
    from stack.launcher import Stack

    stack = Stack(StackConfig.servers_on_free_ports(data_dir, partitions))
    _say(f"starting Mosquitto + Kafka under {data_dir} ...")
    stack.up()
    try:
        yield Servers(
            stack.mqtt_host,
            stack.mqtt_port,
            stack.kafka_bootstrap,
            mosquitto_pid=stack.mosquitto.process.pid,
            kafka_pid=stack.kafka.process.pid,
        )
    finally:
        stack.down()


def _setting_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not _has_setting(name):
        raise argparse.ArgumentTypeError(f"not NAME=VALUE of a BridgeConfig setting: {text!r}")
    return name, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.commands_rtt",
        description=(__doc__ or "").split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--devices", type=int, default=1000, help="online command devices")
    parser.add_argument("--rate", type=float, default=1000.0, help="commands per second")
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds of sending")
    parser.add_argument(
        "--warmup-load",
        type=float,
        default=60.0,
        help="seconds of commands (and telemetry) at the measured rates before the measured "
        "window, not measured: a broker a minute old still spends CPU compiling (its JIT); "
        "60 s took the Kafka CPU in the window from 0.43 to 0.31 of a core",
    )
    parser.add_argument(
        "--command-path",
        choices=["separate", "inline"],
        default="separate",
        help="separate (what iot-stack runs): iot-bridge + `iot-cmd serve` as its own process; "
        "inline: iot-bridge with IOT_COMMANDS_ENABLED=1",
    )
    parser.add_argument(
        "--responder",
        choices=["raw", "sim"],
        default="raw",
        help="who answers: bench/responder.py (raw-socket MQTT 5) or iot-sim (gmqtt)",
    )
    parser.add_argument(
        "--responder-processes", type=int, default=1, help="processes of the raw responder"
    )
    parser.add_argument(
        "--sim-processes", type=int, default=1, help="iot-sim processes (--responder sim)"
    )
    parser.add_argument(
        "--telemetry-rate",
        type=parse_telemetry_rate,
        default=None,
        metavar="MSGS_PER_S|half",
        help="telemetry msgs/s through the bridge meanwhile; 'half' (default) = half the "
        "bridge's maximum: the higher of the one measured first in this run and the one "
        "recorded in bench/results/ingest.json",
    )
    parser.add_argument(
        "--telemetry-payload", type=int, default=1024, help="telemetry payload bytes"
    )
    parser.add_argument(
        "--telemetry-devices",
        type=int,
        default=1000,
        help="telemetry devices (own connections and ids, apart from the command devices)",
    )
    parser.add_argument(
        "--telemetry-processes", type=int, default=2, help="telemetry publisher processes"
    )
    parser.add_argument(
        "--telemetry-window",
        type=int,
        default=20_000,
        help="telemetry published but not yet in Kafka at most (bounds Mosquitto's backlog)",
    )
    parser.add_argument(
        "--max-duration",
        type=float,
        default=8.0,
        help=f"seconds of the maximum measurement (the first {MAX_WARMUP_S:.0f} s left out)",
    )
    parser.add_argument("--partitions", type=int, default=12, help="partitions per topic")
    parser.add_argument(
        "--warmup-timeout", type=float, default=60.0, help="seconds for every device to answer once"
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=30.0, help="seconds to wait for the last statuses"
    )
    parser.add_argument(
        "--mqtt-port",
        type=int,
        default=None,
        help="use this Mosquitto on 127.0.0.1 (with --kafka-bootstrap) instead of a private stack",
    )
    parser.add_argument("--kafka-bootstrap", default=None, help="use this Kafka")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--setting",
        type=_setting_arg,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a BridgeConfig setting for the bridge and the command path, e.g. "
        "command_mqtt_publishers=8 (repeatable)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write commands.json and commands.md here (e.g. bench/results)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.rate <= 0 or args.duration <= 0 or args.devices < 1:
            parser.error("--rate, --duration and --devices must be positive")
        if args.max_duration <= MAX_WARMUP_S + 1:
            parser.error(f"--max-duration must be above {MAX_WARMUP_S + 1:.0f} s")
        if min(args.responder_processes, args.telemetry_processes, args.telemetry_devices) < 1:
            parser.error("process and device counts must be positive")
        if (args.mqtt_port is None) != (args.kafka_bootstrap is None):
            parser.error("--mqtt-port and --kafka-bootstrap go together")
    except SystemExit as exc:  # --help (0) and usage errors (2) as exit codes
        return int(exc.code or 0)
    from bench.suite import machine_info

    machine = machine_info()
    t0 = time.monotonic()
    try:
        if args.mqtt_port is not None:
            result = run(args, Servers("127.0.0.1", args.mqtt_port, args.kafka_bootstrap))
        else:
            with (
                tempfile.TemporaryDirectory(prefix="cmd-rtt-stack-") as tmp,
                own_stack(Path(tmp), args.partitions) as servers,
            ):
                result = run(args, servers)
    except (BenchError, LoadError, ResponderError) as exc:
        print(f"commands_rtt: {exc}", file=sys.stderr)
        return 1
    machine["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = asdict(result)
    print(json.dumps(doc, indent=2))
    full = {
        "started_at": result.started_at,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(time.monotonic() - t0, 1),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "machine": machine,
        "result": doc,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "commands.json").write_text(json.dumps(full, indent=2) + "\n")
        (args.out_dir / "commands.md").write_text(render_markdown(full))
        _say(f"wrote {args.out_dir / 'commands.json'} and commands.md")
    return 0 if result.missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
