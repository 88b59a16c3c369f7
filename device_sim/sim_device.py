"""One simulated device's life: connect, follow its script's schedule, churn or go offline, leave.

The pure :class:`~device_sim.device.DeviceScript` decides what to send, when, and whether the
device drops afterwards (``churn``: back after ``down_s``; ``offline``: gone for good, leaving
its Will); this class carries that out over its :class:`~device_sim.mqtt_session.DeviceSession`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from device_sim.command_replies import CommandReplier
from device_sim.counters import DeviceRecord, Stats
from device_sim.device import DeviceScript
from device_sim.mqtt_session import DeviceSession
from device_sim.pacing import ConnectLimiter, StartGate
from device_sim.run_config import Endpoints, RunOptions

log = logging.getLogger(__name__)


class SimDevice:
    """The I/O side of one device: its MQTT session driven by its script."""

    def __init__(
        self,
        script: DeviceScript,
        *,
        endpoints: Endpoints,
        options: RunOptions,
        stats: Stats,
        limiter: ConnectLimiter,
        stop: asyncio.Event,
        gate: StartGate | None = None,
    ) -> None:
        self.script = script
        self.stats = stats
        self.gate = gate
        self.stop = stop
        self.id = script.device_id
        self.record = DeviceRecord(
            device=self.id,
            groups=list(script.groups),
            qos=script.spec.qos,
            skew_ms=script.skew_ms,
            silent=script.silent,
        )
        self.replier = CommandReplier(script, stats=stats, record=self.record)
        self.session = DeviceSession(
            self.id,
            script.groups,
            endpoints=endpoints,
            options=options,
            stats=stats,
            record=self.record,
            limiter=limiter,
            stop=stop,
            on_message=self.replier.on_message,
        )

    async def run(self) -> DeviceRecord:
        """Run to the end of the script (or ``stop``); a failure is recorded, never raised."""
        try:
            await self._run()
        except Exception as exc:  # noqa: BLE001 (one device's failure must not end the fleet)
            log.warning("device %s failed: %s", self.id, exc)
            self.record.failed = f"{type(exc).__name__}: {exc}"
            self.stats.errors += 1
        finally:
            self.stats.finished += 1
        self.session.settle_acks()
        if self.script.skew_ms:
            self.record.injections["clock_skew"].append(
                {"device": self.id, "skew_ms": self.script.skew_ms}
            )
        return self.record

    async def _run(self) -> None:
        self.session.open()
        connected = await self.session.connect()
        if self.gate is not None:
            self.gate.arrive()
            if connected:
                await self._wait_gate(self.gate)
        if connected and await self._follow_script():
            await self.session.close()

    async def _follow_script(self) -> bool:
        """Publish on the script's schedule; False when the device has left (offline, failed)."""
        loop = asyncio.get_running_loop()
        script = self.script
        target = loop.time()
        while not self.stop.is_set():
            delay = script.next_delay()
            if script.done():
                break
            target += delay
            wait = target - loop.time()
            if wait > 0:
                await self._pause(wait)
                if self.stop.is_set():
                    break
            outs = script.next_messages(int(time.time() * 1000))
            for out in outs:
                self.session.publish(out)
            # the telemetry message says what comes next (events of the slot may follow it)
            last = next(o for o in outs if o.seq is not None)
            if last.after == "churn":
                await self.session.drop()
                await self._pause(last.down_s)
                if not await self.session.connect():
                    return False
                target = loop.time()  # no burst after the outage: skip the missed slots
            elif last.after == "offline":
                await self.session.drop()
                return False
        return True

    async def _wait_gate(self, gate: StartGate) -> None:
        while not gate.opened.is_set() and not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.opened.wait(), 1.0)

    async def _pause(self, seconds: float) -> None:
        """Sleep, in slices, so a stop request is seen within a second."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while not self.stop.is_set():
            left = end - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 1.0))
