"""One chaos run: the stack up, then each cell in turn: the load, the fault, recovery measured
(every service ready, every client path answering), the load stopped, the checks."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.chaos import check, faults, probes
from bench.chaos import stack as chaos_stack
from bench.chaos.load import Load

log = logging.getLogger(__name__)
WARM_S = 10.0  # load before the fault
AFTER_S = 10.0  # load after recovery
RECOVER_TIMEOUT_S = 180.0
SIM_DEVICES = 4  # chaos-00000..3 run `iot-sim run`; the probes and the HTTP device use the rest


@dataclass
class Cell:
    service: str
    fault: str
    lost: int | None = None
    duplicates: int | None = None
    recover_s: float | None = None
    worst: str = ""
    detail: str = ""
    load_avg: str = ""


def _sim(stack: chaos_stack.ChaosStack, runs_dir: Path, run_id: str) -> subprocess.Popen[bytes]:
    """The MQTT devices: `iot-sim run` until stopped (SIGINT: it drains and writes its
    manifest), each device with its own login."""
    return subprocess.Popen(
        [sys.executable, "-m", "device_sim.cli", "run", "--devices", str(SIM_DEVICES),
         "--device-prefix", chaos_stack.DEVICE_PREFIX, "--rate", "5", "--duration", "100000",
         "--credentials", str(stack.data_dir / "chaos-devices.json"),
         "--mqtt-port", str(stack.mqtt_port), "--kafka-bootstrap", stack.bootstrap,
         "--runs-dir", str(runs_dir), "--run-id", run_id, "--no-progress", "--json",
         "--drain-timeout-s", "60"],
        env=stack.env, stdout=subprocess.DEVNULL, stderr=(runs_dir / f"{run_id}.log").open("wb"),
    )  # fmt: skip


def run_cell(stack: chaos_stack.ChaosStack, cell: Cell, runs_dir: Path) -> None:
    tag = f"{cell.service}-{cell.fault}-{int(time.time())}"
    load = Load(stack, tag)
    sim = _sim(stack, runs_dir, tag)
    load.start()
    notes = []
    try:
        time.sleep(WARM_S)  # the load runs a while before the fault
        hit = faults.target(stack, cell.service)  # a cluster's node: chosen now
        if hit != cell.service:
            notes.append(f"hurt {hit}")
        faults.INJECTORS[cell.fault](stack, hit)
        ended = time.monotonic()
        _, waiting = check.wait_ready(stack, RECOVER_TIMEOUT_S)
        if waiting:
            notes.append(f"not ready after {RECOVER_TIMEOUT_S:.0f} s: {', '.join(waiting)}")
        _, failing = probes.wait_all(stack, RECOVER_TIMEOUT_S)
        cell.recover_s = time.monotonic() - ended
        if failing:
            notes.append("still failing: " + "; ".join(f"{k}: {v}" for k, v in failing.items()))
            cell.recover_s = None
        if stack.kafka_nodes > 1:
            notes += _cluster_after(stack, ended)
        time.sleep(AFTER_S)  # the load goes on a while after recovery
    except faults.FaultError as exc:
        notes.append(f"fault not injected: {exc}")
    finally:
        load.stop()
        sim.send_signal(2)
        try:
            sim.wait(120)
        except subprocess.TimeoutExpired:
            sim.kill()
    tally = check.tally(stack, load)
    check.sim_verify(stack, runs_dir, tag, tally)
    cell.lost = sum(tally.lost.values())
    cell.duplicates = sum(tally.duplicates.values())
    cell.worst = check.worst_error(load.paths)
    parts = [f"{k} {v}" for k, v in tally.lost.items() if v]
    dups = [f"{k} {v}" for k, v in tally.duplicates.items() if v]
    cell.detail = "; ".join(
        ([f"lost: {', '.join(parts)}"] if parts else [])
        + ([f"duplicates: {', '.join(dups)}"] if dups else [])
        + tally.notes
        + notes
    )
    cell.load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())


def _cluster_after(stack: chaos_stack.ChaosStack, ended: float) -> list[str]:
    """A cluster cell's notes: when every replica was in sync again (the next cell starts on
    a whole cluster) and which node is the active controller now."""
    waited = check.wait_in_sync(stack, RECOVER_TIMEOUT_S)
    if waited is None:
        out = [f"replicas not all in sync {RECOVER_TIMEOUT_S:.0f} s after recovery"]
    else:
        out = [f"all replicas in sync {time.monotonic() - ended:.0f} s after the fault"]
    try:
        out.append(f"controller afterwards kafka-{faults.controller(stack)}")
    except faults.FaultError as exc:
        out.append(str(exc))
    return out


def run(
    cells: list[tuple[str, str]],
    *,
    analytics: bool,
    keep: bool,
    on_cell: Callable[[list[Cell]], object] = lambda _cells: None,
    kafka_nodes: int = 1,
) -> list[Cell]:
    """Every cell on one stack (faults in sequence; the stack recovers between them);
    ``on_cell`` is given the results so far after each cell (a long run keeps what it got).
    ``kafka_nodes`` 3: the stack's Kafka is the replicated 3-node cluster."""
    work = Path(tempfile.mkdtemp(prefix="iot-chaos-"))
    need_disk = any(f == "disk-full" for _, f in cells)
    stack = chaos_stack.up(work, analytics=analytics, disk=need_disk, devices=SIM_DEVICES + 2,
                           kafka_nodes=kafka_nodes)  # fmt: skip
    runs_dir = work / "sim-runs"
    runs_dir.mkdir()
    results = []
    try:
        waited, failing = probes.wait_all(stack, RECOVER_TIMEOUT_S)
        if failing:
            raise RuntimeError(f"client paths failing before any fault: {failing}")
        log.info("every client path answers (%.0f s after up)", waited)
        for service, fault in cells:
            cell = Cell(service, fault)
            log.info("cell %s x %s", service, fault)
            if fault == "disk-full" and service not in stack.mounts:
                cell.detail = "not run: no tmpfs mount (needs root)"
            else:
                run_cell(stack, cell, runs_dir)
            log.info(
                "  -> lost %s, duplicates %s, recovered in %s s, worst %s; %s",
                cell.lost, cell.duplicates, cell.recover_s, cell.worst, cell.detail,
            )  # fmt: skip
            results.append(cell)
            on_cell(results)
    finally:
        if not keep:
            chaos_stack.down(stack)
    return results
