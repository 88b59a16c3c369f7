"""The fleet over several worker processes: spawn them, relay their stats, gather their records.

Devices are split round-robin. Each worker streams ``("stats", worker, snapshot)`` while it runs
and ends with ``("result", worker, records, cpu_seconds)`` or ``("error", worker, text, 0.0)``.
SIGINT/SIGTERM in this process set a shared flag the workers watch.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
from dataclasses import asdict, dataclass, field
from typing import Any

from device_sim.counters import Stats, merge_snapshots
from device_sim.errors import SimError
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec
from device_sim.worker import StatsSink, StopFlag, WorkerPlan, cpu_seconds, run_worker

QUEUE_POLL_S = 1.0
JOIN_TIMEOUT_S = 10.0


def run_processes(
    spec: FleetSpec,
    run_id: str,
    endpoints: Endpoints,
    options: RunOptions,
    on_stats: StatsSink | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], float, bool]:
    """Run the fleet in worker processes: (records, merged stats, workers' CPU s, interrupted)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop_flag = ctx.Event()
    n = min(options.processes, spec.devices)
    procs = []
    for w in range(n):
        plan = WorkerPlan(spec, run_id, list(range(w, spec.devices, n)), endpoints, options)
        proc = ctx.Process(
            target=_worker_process,
            args=(w, plan, out, stop_flag),
            name=f"iot-sim-worker-{w}",
            daemon=True,
        )
        proc.start()
        procs.append(proc)
    gathered = _Gathered(on_stats)

    def on_signal(signum: int, _frame: Any) -> None:
        stop_flag.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while len(gathered.done) < n:
            try:
                gathered.take(out.get(timeout=QUEUE_POLL_S))
            except queue.Empty:
                gathered.reap(procs, out)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for p in procs:
            p.join(timeout=JOIN_TIMEOUT_S)
    if gathered.errors:
        raise SimError("simulator workers failed: " + "; ".join(gathered.errors))
    stats = merge_snapshots(list(gathered.latest.values()))
    return gathered.records, stats, gathered.cpu, stop_flag.is_set()


@dataclass
class _Gathered:
    """What the workers have sent so far."""

    on_stats: StatsSink | None
    latest: dict[int, dict[str, Any]] = field(default_factory=dict)  # stats, by worker
    records: list[dict[str, Any]] = field(default_factory=list)
    cpu: float = 0.0
    done: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def take(self, msg: tuple[Any, ...]) -> None:
        kind, worker = msg[0], msg[1]
        if kind == "stats":
            self.latest[worker] = msg[2]
            if self.on_stats is not None:
                self.on_stats(merge_snapshots(list(self.latest.values())))
        elif kind == "result":
            self.records.extend(msg[2])
            self.cpu += msg[3]
            self.done.add(worker)
        else:
            self.errors.append(f"worker {worker}: {msg[2]}")
            self.done.add(worker)

    def reap(self, procs: list[Any], out: Any) -> None:
        """A worker that died without a result (killed): account it as failed."""
        for i, proc in enumerate(procs):
            if i not in self.done and not proc.is_alive() and out.empty():
                self.errors.append(f"worker {i} exited with {proc.exitcode}")
                self.done.add(i)


def _worker_process(
    worker: int,
    plan: WorkerPlan,
    out: Any,  # multiprocessing Queue
    stop_flag: StopFlag,  # multiprocessing Event
) -> None:
    """Entry point of one worker process: run its devices, stream stats, send the records."""
    try:
        records, _ = run_worker(
            plan,
            stats=Stats(),
            on_stats=lambda snap: out.put(("stats", worker, snap)),
            stop_flag=stop_flag,
        )
        out.put(("result", worker, [asdict(r) for r in records], cpu_seconds()))
    except BaseException as exc:
        out.put(("error", worker, f"{type(exc).__name__}: {exc}", 0.0))
        raise
