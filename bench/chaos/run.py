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

from bench.chaos import check, edge_cell, edge_site, faults, probes
from bench.chaos import stack as chaos_stack
from bench.chaos.load import Load

log = logging.getLogger(__name__)
WARM_S = 10.0  # load before the fault
AFTER_S = 10.0  # load after recovery
RECOVER_TIMEOUT_S = 180.0
SIM_DEVICES = 4  # chaos-00000..3 run `iot-sim run`; the probes and the HTTP device use the rest
CUT_S = 60.0  # the edge cell's cut (`--cut-s`)


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


def run_cell(
    stack: chaos_stack.ChaosStack,
    cell: Cell,
    runs_dir: Path,
    site: edge_site.EdgeSite | None = None,
    cut_s: float = CUT_S,
) -> None:
    """One cell; ``site``: the run's edge site (the `edge` cell cuts its link for ``cut_s``)."""
    tag = f"{cell.service}-{cell.fault}-{int(time.time())}"
    load = Load(stack, tag)
    sim = _sim(stack, runs_dir, tag)
    cut = None
    if site is not None:
        cut = edge_cell.EdgeCut(site, stack, tag, cut_s, runs_dir / f"{tag}-commands.txt")
    load.start()
    notes = []
    try:
        if cut is not None:
            cut.start()
        time.sleep(WARM_S)  # the load runs a while before the fault
        if cut is not None:
            cut.fault()
        else:
            hit = faults.target(stack, cell.service)  # a cluster's node: chosen now
            if hit != cell.service:
                notes.append(f"hurt {hit}")
            faults.INJECTORS[cell.fault](stack, hit)
        ended = time.monotonic()
        if cut is not None and not cut.wait_back(RECOVER_TIMEOUT_S):
            notes.append(f"edge site not back within {RECOVER_TIMEOUT_S:.0f} s")
        _, waiting = check.wait_ready(stack, RECOVER_TIMEOUT_S)
        if waiting:
            notes.append(f"not ready after {RECOVER_TIMEOUT_S:.0f} s: {', '.join(waiting)}")
        _, failing = probes.wait_all(stack, RECOVER_TIMEOUT_S)
        cell.recover_s = time.monotonic() - ended
        if failing or (cut is not None and None in (cut.link_at, cut.drained_at)):
            cell.recover_s = None
        if failing:
            notes.append("still failing: " + "; ".join(f"{k}: {v}" for k, v in failing.items()))
        if stack.kafka_nodes > 1:
            notes += _cluster_after(stack, ended)
        time.sleep(AFTER_S)  # the load goes on a while after recovery
    except (faults.FaultError, edge_cell.EdgeError) as exc:
        notes.append(f"fault not injected: {exc}")
    finally:
        load.stop()
        sim.send_signal(2)
        try:
            sim.wait(120)
        except subprocess.TimeoutExpired:
            sim.kill()
        if cut is not None:
            notes += cut.stop()
    tally = check.tally(stack, load)
    check.sim_verify(stack, runs_dir, tag, tally)
    if cut is not None:
        cut.tally(tally)
        notes = cut.notes() + notes
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
    cut_s: float = CUT_S,
) -> list[Cell]:
    """Every cell on one stack (faults in sequence; the stack recovers between them);
    ``on_cell`` is given the results so far after each cell (a long run keeps what it got).
    ``kafka_nodes`` 3: the stack's Kafka is the replicated 3-node cluster. With the `edge`
    cell (root only) the stack listens on every address and an edge site in its own network
    namespace is attached to its Mosquitto for the run."""
    work = Path(tempfile.mkdtemp(prefix="iot-chaos-"))
    need_disk = any(f == "disk-full" for _, f in cells)
    edge_why = edge_site.unavailable() if any(s == "edge" for s, _ in cells) else "not asked"
    stack = chaos_stack.up(work, analytics=analytics, disk=need_disk, devices=SIM_DEVICES + 2,
                           kafka_nodes=kafka_nodes,
                           bind_host="0.0.0.0" if edge_why is None else "127.0.0.1")  # fmt: skip
    runs_dir = work / "sim-runs"
    runs_dir.mkdir()
    results = []
    site = None
    try:
        if edge_why is None:
            site = edge_site.up(stack, work)
        waited, failing = probes.wait_all(stack, RECOVER_TIMEOUT_S)
        if failing:
            raise RuntimeError(f"client paths failing before any fault: {failing}")
        log.info("every client path answers (%.0f s after up)", waited)
        for service, fault in cells:
            cell = Cell(service, fault)
            log.info("cell %s x %s", service, fault)
            if fault == "disk-full" and service not in stack.mounts:
                cell.detail = "not run: no tmpfs mount (needs root)"
            elif service == "edge" and site is None:
                cell.detail = f"not run: no edge site ({edge_why})"
            else:
                run_cell(stack, cell, runs_dir, site if service == "edge" else None, cut_s)
            log.info(
                "  -> lost %s, duplicates %s, recovered in %s s, worst %s; %s",
                cell.lost, cell.duplicates, cell.recover_s, cell.worst, cell.detail,
            )  # fmt: skip
            results.append(cell)
            on_cell(results)
    finally:
        if site is not None:
            edge_site.down(site)  # the namespaces go even with --keep
        if not keep:
            chaos_stack.down(stack)
    return results
