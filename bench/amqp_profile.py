"""``python -m bench.amqp_profile``: where iot-amqp's CPU goes on the two paths of `make bench-amqp`
(issue 34, item 6): device uploads into Kafka and the northbound receive.

One Kafka (its own with the launcher, unless ``--kafka-bootstrap``), one ``iot-amqp
--insecure-anonymous`` (bench.amqp_upload.amqp_server), the same load as bench.amqp_upload
(``--generators`` x ``--connections`` python-qpid-proton devices sending 1 KiB readings
unsettled as fast as credit allows) and bench.amqp_north (an application reading
``--north-messages`` records over ``telemetry/default``). Each path runs twice:

1. **clean**: iot-amqp's CPU seconds (from /proc) per message accepted / received, no profiler;
2. **profiled**: the same with py-spy attached (``--native``, so proton's and librdkafka's C
   frames show) for the whole phase; its samples are broken down by layer
   (bench.amqp_breakdown: proton binding/FFI, our amqp code, mapping/validation, Kafka
   client, metrics, event loop, other) for iot-amqp's main thread and for all threads.

The load average is recorded around every phase. One JSON line per run goes to
``--out-dir``/amqp_profile.jsonl; markdown tables are printed. ``--variant NAME=PATH`` runs
iot-amqp from another checkout (e.g. ``git archive BASE | tar -x -C /tmp/base``) as well;
``--rounds`` interleave the variants (A B A B) on one Kafka, so a drift of the shared machine
hits each alike.

    nice -n 19 .venv/bin/python -m bench.amqp_profile --out-dir bench/results
    nice -n 19 .venv/bin/python -m bench.amqp_profile --variant base=/tmp/base --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.amqp_breakdown import Breakdown, breakdown, table
from bench.amqp_north import receive_phase
from bench.amqp_upload import TENANT, TOPIC, amqp_server, cpu_s, phase, reading
from bench.machine import machine_info
from bench.profile_breakdown import parse_raw


@contextlib.contextmanager
def py_spy(pid: int, out: Path, rate_hz: int) -> Iterator[None]:
    """py-spy records ``pid`` (raw collapsed stacks, native frames, per thread) until the
    block ends (SIGINT: py-spy then writes its file)."""
    argv = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
            "--rate", str(rate_hz), "--format", "raw", "--native", "--threads",
            "--output", str(out)]  # fmt: skip
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached before the load starts
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate()
        if not out.exists():
            raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")


def main_cpu_s(pid: int) -> float:
    """CPU seconds of the process's main thread (the event loop: proton and our code)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(pid: int, run: Callable[[], int]) -> dict[str, Any]:
    """``run()`` -> messages; iot-amqp's CPU-µs per message (the process's, and its main
    thread's: librdkafka's threads also poll by the clock, whose share per message grows as
    the rate falls on a busy machine) and the load around it."""
    load0 = os.getloadavg()[0]
    cpu0, main0, t0 = cpu_s(pid), main_cpu_s(pid), time.monotonic()
    count = run()
    cpu, span = cpu_s(pid) - cpu0, time.monotonic() - t0
    main = main_cpu_s(pid) - main0
    return {
        "messages": count,
        "cpu_us_per_msg": round(cpu / count * 1e6, 1) if count else None,
        "main_cpu_us_per_msg": round(main / count * 1e6, 1) if count else None,
        "span_s": round(span, 2),
        "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def _summary(b: Breakdown) -> dict[str, Any]:
    return {
        "samples": b.samples,
        "percent": {k: round(b.percent(k), 1) for k in b.by_layer},
        "top": b.top,
    }


def _profiled(
    pid: int, run: Callable[[], int], raw: Path, rate_hz: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    with py_spy(pid, raw, rate_hz):
        measured = _measure(pid, run)
    stacks = parse_raw(raw.read_text().splitlines())
    return measured, {
        "main_thread": _summary(breakdown(stacks, thread="MainThread")),
        "all_threads": _summary(breakdown(stacks)),
    }


def profile_run(
    bootstrap: str, args: argparse.Namespace, tmp: Path, root: Path | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with amqp_server(bootstrap, tmp / "iot-amqp.log", root) as (url, pid):
        warm = argparse.Namespace(**{**vars(args), "seconds": 1.0})
        deadline = time.monotonic() + 90
        while not phase(url, warm, 0)["accepted"] and time.monotonic() < deadline:
            pass  # a fresh Kafka: until its coordinator gives the producer an id

        def upload() -> int:
            return int(phase(url, args, args.upload_rate)["accepted_all"])

        def north() -> int:
            receive_phase(
                url, bootstrap, topic=TOPIC, tenant=TENANT, count=args.north_messages,
                credit=args.north_credit, cpu=lambda: cpu_s(pid), reading=reading,
            )  # fmt: skip
            return int(args.north_messages)

        for name, run in (("upload", upload), ("north", north)):
            clean = _measure(pid, run)
            clean["msgs_per_s"] = round(clean["messages"] / clean["span_s"])
            if args.no_profile:
                out[name] = {"clean": clean}
                continue
            raw = tmp / f"{name}.raw"
            with_spy, layers = _profiled(pid, run, raw, args.rate)
            if args.keep_raw is not None:
                args.keep_raw.mkdir(parents=True, exist_ok=True)
                (args.keep_raw / f"{tmp.name}-{name}.raw").write_bytes(raw.read_bytes())
            out[name] = {"clean": clean, "profiled": with_spy, **layers}
    return out


def _print(result: dict[str, Any]) -> None:
    for name in ("upload", "north"):
        r = result[name]
        clean = r["clean"]
        print(f"\n## {name}: {clean['messages']} messages, {clean['msgs_per_s']} msgs/s, "
              f"{clean['cpu_us_per_msg']} CPU-µs/msg of iot-amqp, main thread "
              f"{clean['main_cpu_us_per_msg']} (clean), load {clean['load_1min']}")  # fmt: skip
        if "all_threads" not in r:
            continue
        every = r["all_threads"]["samples"]
        for scope in ("main_thread", "all_threads"):
            s = r[scope]
            b = Breakdown(s["samples"], {k: round(v * s["samples"] / 100) for k, v in
                                         s["percent"].items()}, s["top"])  # fmt: skip
            print(f"\n{scope} ({s['samples']} samples):")
            print("\n".join(table(b, clean["cpu_us_per_msg"], every)))
        print("\ntop Python frames (main thread, samples):")
        for leaf, n in r["main_thread"]["top"]:
            print(f"  {n:6d}  {leaf}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kafka-bootstrap", help="an existing Kafka (default: start one)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of an upload phase")
    parser.add_argument("--generators", type=int, default=2, help="load processes")
    parser.add_argument("--connections", type=int, default=8, help="devices per generator")
    parser.add_argument("--north-messages", type=int, default=30_000,
                        help="records each northbound phase reads")  # fmt: skip
    parser.add_argument("--north-credit", type=int, default=500,
                        help="the northbound receiver's credit")  # fmt: skip
    parser.add_argument("--upload-rate", type=float, default=0.0,
                        help="upload phases paced to this many msgs/s (0: as fast as credit "
                        "allows)")  # fmt: skip
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--no-profile", action="store_true",
                        help="only the clean phases (an A/B of CPU per message)")  # fmt: skip
    parser.add_argument("--keep-raw", type=Path, help="keep py-spy's raw stacks here")
    parser.add_argument("--label", default="this", help="this checkout's name in the results")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=PATH: iot-amqp from another checkout too")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the variants")
    parser.add_argument("--out-dir", type=Path, help="append the result to amqp_profile.jsonl")
    args = parser.parse_args(argv)
    if min(args.seconds, args.generators, args.connections, args.north_messages,
           args.rounds) <= 0:  # fmt: skip
        parser.error("--seconds, --generators, --connections, --north-messages, --rounds > 0")
    variants: list[tuple[str, Path | None]] = [(args.label, None)]
    for text in args.variant:
        name, sep, path = text.partition("=")
        if not sep or not name or not Path(path, "amqp").is_dir():
            parser.error(f"--variant NAME=PATH of a checkout with amqp/, got {text!r}")
        variants.append((name, Path(path).resolve()))
    with tempfile.TemporaryDirectory(prefix="bench-amqp-profile-") as tmp:
        if args.kafka_bootstrap:
            _rounds(args.kafka_bootstrap, args, Path(tmp), variants)
        else:
            from bench.commands.stack_setup import own_stack

            with own_stack(Path(tmp) / "stack", partitions=3) as servers:
                _rounds(servers.bootstrap, args, Path(tmp), variants)
    return 0


def _rounds(
    bootstrap: str, args: argparse.Namespace, tmp: Path, variants: list[tuple[str, Path | None]]
) -> None:
    for n in range(args.rounds):
        for name, root in variants:
            run_dir = tmp / f"{name}-{n}"
            run_dir.mkdir()
            result = profile_run(bootstrap, args, run_dir, root)
            summary = {
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "label": name,
                "round": n,
                "machine": machine_info(),
                "settings": {k: vars(args)[k] for k in ("seconds", "generators", "connections",
                                                        "north_messages", "north_credit", "rate",
                                                        "upload_rate", "no_profile")},
                **result,
            }  # fmt: skip
            print(f"\n# {name}, round {n}")
            _print(result)
            if args.out_dir is not None:
                args.out_dir.mkdir(parents=True, exist_ok=True)
                with (args.out_dir / "amqp_profile.jsonl").open("a") as out:
                    out.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    sys.exit(main())
