"""The soak benchmark's options (defaults: the issue's 30 minutes at 80 % of the maximum)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SoakOptions:
    duration_s: float = 1800.0
    rate: float | None = None  # msgs/s; None: `fraction` of the maximum probed first
    fraction: float = 0.8
    probe_s: float = 20.0
    payload_bytes: int = 1024
    devices: int = 1000
    partitions: int = 12
    publisher_processes: int = 2
    sample_s: float = 5.0
    window_s: float = 300.0  # the first and the last window compared
    out_dir: Path = Path("bench/results")
    name: str = "soak"

    @property
    def compare_window_s(self) -> float:
        """The windows compared: 5 minutes, or a fifth of a shorter run."""
        return min(self.window_s, self.duration_s / 5)


def parser() -> argparse.ArgumentParser:
    d = SoakOptions()
    p = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description="The bridge at a steady rate (by default 80 %% of the maximum measured "
        "first) for a long time: throughput of the first and the last window, bridge RSS, "
        "ack lag, lost and duplicated messages, over time, into bench/results.",
    )
    p.add_argument("--duration", type=float, default=d.duration_s,
                   help=f"seconds at the steady rate (default {d.duration_s:.0f})")  # fmt: skip
    p.add_argument("--rate", type=float, default=None,
                   help="msgs/s offered (default: --fraction of the rate a saturation probe "
                   "measures first)")  # fmt: skip
    p.add_argument("--fraction", type=float, default=d.fraction,
                   help=f"share of the probed maximum offered (default {d.fraction})")  # fmt: skip
    p.add_argument("--probe", type=float, default=d.probe_s,
                   help=f"seconds of the saturation probe (default {d.probe_s:.0f})")  # fmt: skip
    p.add_argument("--payload-bytes", type=int, default=d.payload_bytes,
                   help=f"payload size (default {d.payload_bytes})")  # fmt: skip
    p.add_argument("--devices", type=int, default=d.devices,
                   help=f"devices, one MQTT connection each (default {d.devices})")  # fmt: skip
    p.add_argument("--partitions", type=int, default=d.partitions,
                   help=f"telemetry partitions (default {d.partitions})")  # fmt: skip
    p.add_argument("--publisher-processes", type=int, default=d.publisher_processes,
                   help=f"load generator processes (default {d.publisher_processes})")  # fmt: skip
    p.add_argument("--sample-s", type=float, default=d.sample_s,
                   help=f"seconds between samples (default {d.sample_s:.0f})")  # fmt: skip
    p.add_argument("--window", type=float, default=d.window_s,
                   help="seconds of the first and last windows compared (default 300; a "
                   "fifth of the run when that is shorter)")  # fmt: skip
    p.add_argument("--out-dir", type=Path, default=d.out_dir,
                   help="where soak.{json,md,png} go (default bench/results)")  # fmt: skip
    p.add_argument("--name", default=d.name, help="file name stem (default soak)")
    return p


def from_args(args: argparse.Namespace) -> SoakOptions:
    opts = SoakOptions(
        duration_s=args.duration,
        rate=args.rate,
        fraction=args.fraction,
        probe_s=args.probe,
        payload_bytes=args.payload_bytes,
        devices=args.devices,
        partitions=args.partitions,
        publisher_processes=args.publisher_processes,
        sample_s=args.sample_s,
        window_s=args.window,
        out_dir=args.out_dir,
        name=args.name,
    )
    problems = [
        why
        for ok, why in (
            (opts.duration_s >= 10, "--duration must be at least 10 s"),
            (opts.rate is None or opts.rate > 0, "--rate must be > 0"),
            (0 < opts.fraction <= 1, "--fraction must be in (0, 1]"),
            (opts.probe_s >= 3, "--probe must be at least 3 s"),
            (opts.devices >= 1, "--devices must be >= 1"),
            (opts.sample_s > 0, "--sample-s must be > 0"),
            (opts.window_s > 0, "--window must be > 0"),
        )
        if not ok
    ]
    if problems:
        raise SystemExit("bench.soak: " + "; ".join(problems))
    return opts
