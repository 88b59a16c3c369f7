"""The fleet benchmark's options (defaults: the issue's 30 minutes and 20,000 devices)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

DEVICES_PER_PROCESS = 5_000  # one asyncio simulator process holds this many connections well


@dataclass(frozen=True)
class FleetOptions:
    duration_s: float
    devices: int
    rate: float
    payload_bytes: int
    processes: int
    connect_rate: float
    partitions: int
    sample_s: float
    timeline_s: float
    out_dir: Path
    name: str
    insecure_anonymous: bool = False

    @property
    def target_msgs_per_s(self) -> float:
        return self.devices * self.rate


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.fleet",
        description="A fleet run at scale: connect time, throughput, latency over time, "
        "CPU/RSS over time, the verifier's verdict, into bench/results.",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=1800.0,
        help="seconds of traffic once the fleet is connected (default 1800)",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=20_000,
        help="devices, one MQTT connection each (default 20000)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.25,
        help="messages/s per device (default 0.25: 5,000 msgs/s for 20,000)",
    )
    p.add_argument(
        "--payload-bytes",
        type=int,
        default=512,
        help="each telemetry payload padded to this size (default 512)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help=f"simulator processes (default: one per {DEVICES_PER_PROCESS:,} devices, at least 2)",
    )
    p.add_argument(
        "--connect-rate",
        type=float,
        default=500.0,
        help="new MQTT connections/s for the whole fleet (default 500)",
    )
    p.add_argument("--partitions", type=int, default=12, help="telemetry partitions (default 12)")
    p.add_argument(
        "--sample-s",
        type=float,
        default=5.0,
        help="seconds between CPU/RSS/progress samples (default 5)",
    )
    p.add_argument(
        "--timeline-s",
        type=float,
        default=10.0,
        help="window of the latency-over-time percentiles (default 10)",
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        default=Path("bench/results"),
        help="where fleet.json/.md/.png go (default bench/results)",
    )
    p.add_argument("--name", default="fleet", help="file name stem of the results (default fleet)")
    p.add_argument(
        "--insecure-anonymous",
        action="store_true",
        help="anonymous Mosquitto, no device credentials (by default each device is "
        "provisioned its own secret through the registry and logs in with it)",
    )
    return p  # fmt: skip


def from_args(args: argparse.Namespace) -> FleetOptions:
    if args.devices < 1 or args.duration <= 0 or args.rate <= 0 or args.connect_rate <= 0:
        raise SystemExit("--devices, --duration, --rate and --connect-rate must be > 0")
    processes = args.processes or max(2, math.ceil(args.devices / DEVICES_PER_PROCESS))
    return FleetOptions(
        duration_s=args.duration,
        devices=args.devices,
        rate=args.rate,
        payload_bytes=args.payload_bytes,
        processes=processes,
        connect_rate=args.connect_rate,
        partitions=args.partitions,
        sample_s=args.sample_s,
        timeline_s=args.timeline_s,
        out_dir=args.out_dir,
        name=args.name,
        insecure_anonymous=args.insecure_anonymous,
    )
