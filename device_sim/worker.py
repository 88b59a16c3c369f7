"""One worker: a share of the fleet's devices on one asyncio event loop.

:func:`run_worker` runs in the ``iot-sim`` process itself (one process) or as the body of a
spawned worker process (:mod:`device_sim.worker_pool`). It stops early on SIGINT/SIGTERM, or
when the pool's shared stop flag is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from device_sim.counters import DeviceRecord, Stats
from device_sim.device import DeviceScript
from device_sim.open_files import raise_open_files
from device_sim.pacing import ConnectLimiter, StartGate
from device_sim.run_config import Endpoints, RunOptions
from device_sim.sim_device import SimDevice
from device_sim.spec import FleetSpec

log = logging.getLogger(__name__)

STATS_INTERVAL_S = 0.5
STOP_POLL_S = 0.2
FD_HEADROOM = 256  # open files beyond one socket per device (logs, Kafka, the loop itself)

StatsSink = Callable[[dict[str, Any]], None]


class StopFlag(Protocol):
    """A flag another process may set (a ``multiprocessing.Event``)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker runs: devices ``indices`` of ``spec``, connecting to ``endpoints``."""

    spec: FleetSpec
    run_id: str
    indices: list[int]
    endpoints: Endpoints
    options: RunOptions


async def run_devices(
    plan: WorkerPlan,
    *,
    stats: Stats,
    stop: asyncio.Event,
    on_stats: StatsSink | None = None,
) -> list[DeviceRecord]:
    """Run the plan's devices on the current loop until their scripts end or ``stop``."""
    options = plan.options
    limiter = ConnectLimiter(options.connect_rate / max(1, options.processes))
    gate = StartGate(len(plan.indices)) if options.sync_start else None
    devices = [
        SimDevice(
            DeviceScript(plan.spec, i, plan.run_id),
            endpoints=plan.endpoints,
            options=options,
            stats=stats,
            limiter=limiter,
            stop=stop,
            gate=gate,
        )
        for i in plan.indices
    ]
    tasks = [asyncio.create_task(d.run()) for d in devices]

    async def report() -> None:
        while True:
            if on_stats is not None:
                on_stats(stats.snapshot())
            await asyncio.sleep(STATS_INTERVAL_S)

    reporter = asyncio.create_task(report())
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        if on_stats is not None:
            on_stats(stats.snapshot())


def run_worker(
    plan: WorkerPlan,
    *,
    stats: Stats,
    on_stats: StatsSink | None,
    stop_flag: StopFlag | None = None,
) -> tuple[list[DeviceRecord], bool]:
    """Run the plan on a new event loop; returns the records and whether it was stopped."""
    quiet_gmqtt()
    got = raise_open_files(len(plan.indices) + FD_HEADROOM)
    if got < len(plan.indices) + FD_HEADROOM:
        log.warning(
            "open-file limit %d is below the %d this worker's devices need (run as root, raise "
            "the hard limit with `ulimit -Hn`, or use more --processes)",
            got,
            len(plan.indices) + FD_HEADROOM,
        )

    async def main() -> tuple[list[DeviceRecord], bool]:
        stop = asyncio.Event()
        _install_stop(asyncio.get_running_loop(), stop)
        watcher = None if stop_flag is None else asyncio.create_task(_watch(stop_flag, stop))
        try:
            records = await run_devices(plan, stats=stats, stop=stop, on_stats=on_stats)
        finally:
            if watcher is not None:
                watcher.cancel()
        return records, stop.is_set()

    return asyncio.run(main())


async def _watch(flag: StopFlag, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if flag.is_set():
            stop.set()
        await asyncio.sleep(STOP_POLL_S)


def _install_stop(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        # not possible off the main thread (ValueError) or on some platforms
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def quiet_gmqtt() -> None:
    for name in ("gmqtt", "gmqtt.client", "gmqtt.mqtt"):
        logging.getLogger(name).setLevel(logging.ERROR)


def cpu_seconds() -> float:
    """CPU time (user + system) this process has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
