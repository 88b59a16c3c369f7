"""``python -m bench.profile_bridge``: our bridge alone, at chosen rates, profiled and A/B'd.

One Mosquitto + Kafka (the launcher, free ports, a temporary directory) for every run; the
ingest suite's load (``bench.load``) and its accounting (``bench.suite_runner``). Each run
measures msgs/s, CPU s per million messages, publish -> Kafka p50/p99 and lost/dup/reordered,
with the load average before and after. ``--profile`` attaches py-spy to the bridge for the
measured window (after the warm-up) and breaks its samples down by stage
(``bench.profile_breakdown``), with the CPU of librdkafka's threads apart from Python's.

Variants (``--variant NAME=PATH[@setting=value,...]``) are other checkouts of the project (a
git worktree of the base commit) and/or other settings; rounds interleave them (A B A B ...),
so a drift of the shared machine hits every variant alike.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import loadavg
from bench.process_sinks import ProcessSink
from bench.procstat import thread_cpu_seconds
from bench.profile_breakdown import (
    STAGES,
    breakdown,
    parse_raw,
    produce_lines_of,
    thread_group,
)
from bench.results import RunResult
from bench.sinks import Sink
from bench.suite_options import OURS, ROOT, SuiteOptions, SuiteRun
from bench.suite_runner import Runner
from stack.config import StackConfig
from stack.launcher import Stack


@dataclass(frozen=True)
class Variant:
    name: str
    root: Path
    settings: tuple[tuple[str, str], ...] = ()


def parse_variant(text: str) -> Variant:
    """``NAME=PATH[@k=v,k=v]`` -> a Variant (ValueError if malformed)."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"expected NAME=PATH[@setting=value,...], got {text!r}")
    path, _, opts = rest.partition("@")
    settings: list[tuple[str, str]] = []
    for item in filter(None, (o.strip() for o in opts.split(","))):
        k, eq, v = item.partition("=")
        if not eq:
            raise ValueError(f"setting needs NAME=VALUE, got {item!r}")
        settings.append((k.strip(), v.strip()))
    return Variant(name.strip(), Path(path or ".").resolve(), tuple(settings))


def parse_rate(text: str, maximum: float | None) -> float | None:
    """``max`` -> None (unpaced); ``half`` / ``N%`` of ``maximum``; or msgs/s."""
    text = text.strip()
    if text == "max":
        return None
    if text == "half" or text.endswith("%"):
        if maximum is None:
            raise ValueError(f"rate {text!r} needs a maximum (a 'max' run first or --max-rate)")
        share = 0.5 if text == "half" else float(text[:-1]) / 100
        return max(10.0, round(maximum * share, -1))
    return float(text)


@dataclass
class Profiler:
    """Called by the runner once the load starts: waits out the warm-up, then records the
    bridge's threads' CPU and (optionally) py-spy samples over the measured window."""

    warmup_s: float
    window_s: float
    out: Path | None
    rate_hz: int = 100
    thread_cpu: dict[str, float] = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def __call__(self, sink: Sink) -> None:
        if not isinstance(sink, ProcessSink) or not sink.pids():
            return
        pid = sink.pids()[0]
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        time.sleep(self.warmup_s)
        before = thread_cpu_seconds(pid)
        if self.out is not None:
            argv = [
                str(Path(sys.executable).with_name("py-spy")),
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(max(1, int(self.window_s))),
                "--rate",
                str(self.rate_hz),
                "--format",
                "raw",
                "--native",
                "--threads",
                "--output",
                str(self.out),
            ]
            subprocess.run(argv, capture_output=True, check=False, timeout=self.window_s + 60)
        else:
            time.sleep(self.window_s)
        after = thread_cpu_seconds(pid)
        groups: dict[str, float] = {}
        for name, cpu in after.items():
            g = thread_group(name)
            groups[g] = groups.get(g, 0.0) + cpu - before.get(name, 0.0)
        self.thread_cpu = {k: round(v, 2) for k, v in groups.items()}

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=self.window_s + 120)


class _Attached:
    """Servers someone else started: what the runner reads of a Stack."""

    class _NoProcess:
        def pid(self) -> None:
            return None

    def __init__(self, spec: str) -> None:
        kafka, _, mqtt = spec.partition(",")
        host, _, port = mqtt.rpartition(":")
        self.kafka_bootstrap = kafka
        self.mqtt_host = host
        self.mqtt_port = int(port)
        self.mosquitto = type("M", (), {"process": self._NoProcess()})()

    def down(self) -> None:
        pass


def _row(variant: Variant, label: str, r: RunResult, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "variant": variant.name,
        "rate": label,
        "offered": r.offered_rate,
        "msgs_per_s": None if r.msgs_per_s is None else round(r.msgs_per_s),
        "cpu_s_per_million": r.cpu_s_per_million,
        "p50_ms": r.latency_p50_ms,
        "p99_ms": r.latency_p99_ms,
        "to_bridge_p99_ms": r.to_bridge_p99_ms,
        "to_kafka_p99_ms": r.to_kafka_p99_ms,
        "lost": r.lost,
        "dup": r.duplicates,
        "reordered": r.reordered,
        "peak_rss_mb": r.peak_rss_mb,
        "error": r.error,
        "notes": r.notes,
        **extra,
    }


def _fmt(v: Any, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| round | variant | rate | msgs/s | CPU s/M | p50 / p99 ms | p99 ms to bridge / to Kafka "
        "| lost/dup/reord | load before -> after | bridge threads CPU s (py / rdk main / rdk "
        "brokers) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        t = r.get("thread_cpu") or {}
        threads = " / ".join(
            _fmt(t.get(k), ".1f")
            for k in (
                "Python threads (event loop + helpers)",
                "librdkafka main/other threads",
                "librdkafka broker threads",
            )
        )
        lines.append(
            f"| {r['round']} | {r['variant']} | {r['rate']} ({_fmt(r['offered'])}) | "
            f"{_fmt(r['msgs_per_s'])} | {_fmt(r['cpu_s_per_million'], '.1f')} | "
            f"{_fmt(r['p50_ms'], '.0f')} / {_fmt(r['p99_ms'], '.0f')} | "
            f"{_fmt(r.get('to_bridge_p99_ms'), '.0f')} / {_fmt(r.get('to_kafka_p99_ms'), '.0f')} | "
            f"{r['lost']}/{r['dup']}/{r['reordered']} | "
            f"{' '.join(r['load_before'][:1])} -> {' '.join(r['load_after'][:1])} | {threads} |"
        )
    return head + "\n".join(lines) + "\n"


def breakdown_markdown(rows: list[dict[str, Any]]) -> str:
    have = [r for r in rows if r.get("breakdown")]
    if not have:
        return ""
    head = "| run | samples | " + " | ".join(STAGES) + " |\n"
    head += "|---" * (len(STAGES) + 2) + "|\n"
    lines = []
    for r in have:
        b = r["breakdown"]
        cells = " | ".join(f"{b['percent'][s]:.0f}%" for s in STAGES)
        lines.append(f"| {r['round']} {r['variant']} {r['rate']} | {b['samples']} | {cells} |")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_bridge", description=__doc__)
    p.add_argument("--variant", action="append", default=[], help="NAME=PATH[@k=v,...]")
    p.add_argument("--rates", default="max,half,1%", help="comma-separated: max, half, N%%, N")
    p.add_argument("--max-rate", type=float, help="the maximum for half / N%% (default: measured)")
    p.add_argument("--rounds", type=int, default=1, help="interleaved rounds (1)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of load per run (10)")
    p.add_argument("--payload", type=int, default=1024, help="payload bytes (1024)")
    p.add_argument("--devices", type=int, default=1000)
    p.add_argument("--profile", action="store_true", help="py-spy the bridge in each run")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bridge-profile")
    p.add_argument(
        "--attach",
        metavar="KAFKA,MQTT_HOST:PORT",
        help="use running servers instead of starting them (Mosquitto's CPU is then not read)",
    )
    args = p.parse_args(argv)
    variants = [parse_variant(v) for v in args.variant] or [Variant("this", ROOT)]
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="iot-profile-"))
    opts = SuiteOptions(duration_s=args.duration, devices=args.devices, data_dir=data_dir)
    stack: Any
    if args.attach:
        stack = _Attached(args.attach)
    else:
        # anonymous, explicitly: the profile measures the data path, not the log-in
        stack = Stack(
            StackConfig.servers_on_free_ports(
                data_dir / "stack", opts.partitions, insecure_anonymous=True
            )
        )
        stack.up()
    rows: list[dict[str, Any]] = []
    maximum = args.max_rate
    try:
        for rnd in range(1, args.rounds + 1):
            for label in args.rates.split(","):
                for v in variants:
                    rate = parse_rate(label, maximum)
                    run_opts = SuiteOptions(**{**opts.__dict__, "bridge_settings": v.settings})
                    runner = Runner(stack, run_opts, SuiteRun(options=run_opts, machine={}))
                    runner.bridge_root = v.root
                    warmup = max(1.0, 0.2 * args.duration)
                    spy = (
                        args.out / f"{rnd}-{v.name}-{label.replace('%', 'pct')}.raw"
                        if args.profile
                        else None
                    )
                    prof = Profiler(warmup, args.duration - warmup - 0.5, spy)
                    runner.on_go = prof
                    before = loadavg()
                    scenario = "throughput" if rate is None else "latency"
                    r = runner.mqtt_run(OURS, scenario, args.payload, rate=rate)
                    prof.join()
                    extra: dict[str, Any] = {
                        "round": rnd,
                        "load_before": before,
                        "load_after": loadavg(),
                        "thread_cpu": prof.thread_cpu,
                    }
                    if spy is not None and spy.exists():
                        lines_of_v = produce_lines_of(
                            (v.root / "bridge" / "pipeline.py").read_text()
                        )
                        b = breakdown(
                            parse_raw(spy.read_text().splitlines()), lines_of_v, "MainThread"
                        )
                        extra["breakdown"] = {
                            "samples": b.samples,
                            "percent": {s: round(b.percent(s), 1) for s in STAGES},
                        }
                    row = _row(v, label, r, extra)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if rate is None and maximum is None and r.msgs_per_s and v is variants[0]:
                        maximum = r.msgs_per_s
    finally:
        stack.down()
    (args.out / "runs.json").write_text(json.dumps(rows, indent=1))
    text = markdown(rows) + "\n" + breakdown_markdown(rows)
    (args.out / "runs.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
