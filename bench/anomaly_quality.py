"""Quality of the anomaly detector: precision and recall per seed, and the NAB slice's score.

    python -m bench.anomaly_quality                       # seeds 1-5, 50 devices x 600 readings
    python -m bench.anomaly_quality --seeds 1-8 --threshold 10 --log-threshold 12

Simulator: :func:`device_sim.labelled.labelled_run` (the readings ``iot-sim run`` sends for the
seed, and the anomalies its scripts planted: our own generator's labels), scored by the pure
detector (:func:`spark_jobs.anomaly.score_readings`, the function the streaming job runs per
device) and matched as ``iot-analytics score`` does (device, seq, metric).

NAB: the slice of ``machine_temperature_system_failure`` under tests/spark_jobs/data/nab/ (one
series, NAB's labelled windows), scored as one device; detections inside a window count as
right, windows with a detection as found. Reported as it is: there is no target.

Pure Python, no server; about 10 s per seed on the 2-core VM.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from device_sim.labelled import labelled_run
from spark_jobs.anomaly import (
    AnomalyRule,
    Baseline,
    Reading,
    score_against_manifest,
    score_against_windows,
    score_readings,
)

NAB_DIR = Path(__file__).resolve().parent.parent / "tests" / "spark_jobs" / "data" / "nab"
_NAB_TIME = "%Y-%m-%d %H:%M:%S"


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def _epoch_s(text: str) -> int:
    return int(dt.datetime.strptime(text[:19], _NAB_TIME).replace(tzinfo=dt.UTC).timestamp())


def simulator_row(seed: int, devices: int, count: int, rule: AnomalyRule) -> str:
    run = labelled_run(seed, devices=devices, count=count)
    by_device: dict[str, list[Reading]] = {}
    for r in run.readings:
        by_device.setdefault(r.device_id, []).append(Reading(r.seq, r.ts, r.metrics))
    detected = [
        (device, a.seq, a.metric)
        for device, readings in by_device.items()
        for a in score_readings(readings, Baseline(), rule)
    ]
    s = score_against_manifest(detected, run.manifest())
    return (
        f"| {seed} | {len(run.anomalies)} | {s.true_positives} | {s.false_positives} | "
        f"{s.false_negatives} | {s.precision:.3f} | {s.recall:.3f} |"
    )


def nab_row(rule: AnomalyRule) -> str:
    labels = json.loads((NAB_DIR / "windows.json").read_text())
    windows = [(_epoch_s(lo), _epoch_s(hi)) for lo, hi in labels["windows"]]
    lines = (NAB_DIR / "machine_temperature_system_failure.csv").read_text().splitlines()[1:]
    readings = []
    for i, line in enumerate(lines, start=1):
        stamp, value = line.split(",")
        readings.append(Reading(i, _epoch_s(stamp), {"value": float(value)}))
    found = score_readings(readings, Baseline(), rule)
    w = score_against_windows([a.ts for a in found], windows)
    return (
        f"NAB {labels['series']} (slice, {len(readings)} readings): {w.detections} detections, "
        f"{w.detections_inside} inside a window (precision {w.precision:.3f}), "
        f"{w.windows_hit}/{w.windows} windows found (recall {w.recall:.3f})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.anomaly_quality", description=__doc__)
    p.add_argument("--seeds", default="1-5", help="seeds: 1-5 or 1,4,9 (default 1-5)")
    p.add_argument("--devices", type=int, default=50, help="devices per seed (default 50)")
    p.add_argument("--count", type=int, default=600, help="readings per device (default 600)")
    p.add_argument("--threshold", type=float, default=None, help="raw metrics' threshold")
    p.add_argument("--log-threshold", type=float, default=None, help="log metrics' threshold")
    p.add_argument("--no-nab", action="store_true", help="skip the NAB slice")
    args = p.parse_args(argv)
    base = AnomalyRule()
    rule = AnomalyRule(
        threshold=base.threshold if args.threshold is None else args.threshold,
        log_threshold=base.log_threshold if args.log_threshold is None else args.log_threshold,
    )
    print(f"rule: {rule}")
    print("| seed | planted | TP | FP | FN | precision | recall |")
    print("|---|---|---|---|---|---|---|")
    for seed in _seeds(args.seeds):
        print(simulator_row(seed, args.devices, args.count, rule), flush=True)
    if not args.no_nab:
        print(nab_row(rule))
    return 0


if __name__ == "__main__":
    sys.exit(main())
