"""bench.verify_speed's pure parts: the manifest matches what the fill writes, and the fill's
records (the bridge's mapping of the simulator's payload) are read back as the run's."""

from __future__ import annotations

from typing import Any

from bench.verify_speed import METRICS, RUN_ID, manifest
from bridge.mapping import Topics, map_message
from device_sim.device import DeviceScript
from device_sim.spec import FleetSpec
from device_sim.verifier import TelemetryRows


def test_manifest_expects_the_seqs_the_fill_writes() -> None:
    doc = manifest(records=10, devices=4, started_ms=1_000)
    sent = {d: info["sent"] for d, info in doc["devices"].items()}
    assert sent == {"dev-00000": 3, "dev-00001": 3, "dev-00002": 2, "dev-00003": 2}
    assert doc["run_id"] == RUN_ID
    assert manifest(records=2, devices=4, started_ms=0)["devices"].keys() == {
        "dev-00000",
        "dev-00001",
    }


class _Msg:
    def __init__(self, rec: Any) -> None:
        self.rec = rec

    def value(self) -> bytes:
        return bytes(self.rec.value)

    def key(self) -> bytes | None:
        return self.rec.key

    def headers(self) -> list[tuple[str, bytes]]:
        return list(self.rec.headers)

    def partition(self) -> int:
        return 0

    def timestamp(self) -> tuple[int, int]:
        return (2, 5_000)


def test_the_fills_records_are_the_runs_telemetry() -> None:
    spec = FleetSpec(devices=1, payload_bytes=512, seed=19)
    script = DeviceScript(spec, 0, RUN_ID)
    payload = script.encode(4_000, 7, METRICS)
    assert len(payload) == 512
    rec = map_message(
        script.telemetry_topic, payload, 1, 4_010, topics=Topics(telemetry="t"),
        max_payload_bytes=1 << 20,
    )  # fmt: skip
    assert rec.topic == "t"
    rows = TelemetryRows(RUN_ID)([_Msg(rec)])  # type: ignore[list-item]
    assert rows == [("dev-00000", 7, 0, 5_000, 4_000, 4_010)]
