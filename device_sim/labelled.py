"""The simulator's readings and anomaly labels without a broker: a labelled data set.

:func:`labelled_run` drives every device's :class:`~device_sim.device.DeviceScript` on nominal
time (no clock, no I/O) and returns what the devices would send (device, seq, ts, metrics) with
the anomalies the scripts planted, exactly as a run's manifest lists them (``injections.
anomalies``). It is the same data as ``iot-sim run`` with the same seed, minus the network: the
anomaly detector's quality is measured on it (tests, ``python -m bench.anomaly_quality``).

The labels are our own generator's: the injection sizes (temperature +-12..25, vibration
x20..50 + 2, humidity pinned near 0 or 100) were chosen by us, so a score on this data says how
well the detector separates *these* faults from *this* sensor model's natural behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from device_sim.device import DeviceScript
from device_sim.spec import FleetSpec

START_MS = 1_700_000_000_000  # a fixed device-clock origin: the same seed gives the same ts


@dataclass(frozen=True, slots=True)
class LabelledReading:
    device_id: str
    seq: int
    ts: int
    metrics: dict[str, float]


@dataclass(frozen=True, slots=True)
class LabelledRun:
    readings: list[LabelledReading]
    anomalies: frozenset[tuple[str, int, str]]  # planted (device, seq, metric)

    def manifest(self) -> dict[str, object]:
        """The labels shaped like a manifest's ``injections`` (``score_against_manifest``)."""
        rows = [{"device": d, "seq": s, "metric": m} for d, s, m in sorted(self.anomalies)]
        return {"injections": {"anomalies": rows}}


def labelled_run(
    seed: int,
    *,
    devices: int = 50,
    count: int = 600,
    anomaly_rate: float = 0.01,
    device_prefix: str = "dev",
    rate: float = 1.0,
) -> LabelledRun:
    """``devices`` devices x ``count`` telemetry readings of seed ``seed``, with their labels."""
    spec = FleetSpec(
        devices=devices,
        seed=seed,
        count=count,
        duration_s=None,
        anomaly_rate=anomaly_rate,
        device_prefix=device_prefix,
        rate=rate,
    )
    readings: list[LabelledReading] = []
    planted: set[tuple[str, int, str]] = set()
    for index in range(devices):
        script = DeviceScript(spec, index, "labelled")
        nominal_ms = 0.0
        while not script.done():
            nominal_ms += script.next_delay() * 1000.0
            for out in script.next_messages(START_MS + int(nominal_ms)):
                if out.seq is None:
                    continue
                doc = orjson.loads(out.payload)
                readings.append(
                    LabelledReading(
                        script.device_id, int(doc["seq"]), int(doc["ts"]), doc["metrics"]
                    )
                )
                for kind, item in out.injections:
                    if kind == "anomalies":
                        planted.add((str(item["device"]), int(item["seq"]), str(item["metric"])))
    return LabelledRun(readings, frozenset(planted))
