from __future__ import annotations

from device_sim.device import DeviceScript
from device_sim.labelled import START_MS, labelled_run
from device_sim.spec import FleetSpec


def test_labelled_run_is_the_scripts_data_and_labels() -> None:
    run = labelled_run(7, devices=3, count=50, anomaly_rate=0.1)
    assert run == labelled_run(7, devices=3, count=50, anomaly_rate=0.1)  # seeded
    assert len(run.readings) == 150
    assert [r.seq for r in run.readings if r.device_id == "dev-00001"] == list(range(1, 51))
    assert min(r.ts for r in run.readings) >= START_MS
    # the labels are what the scripts planted, and the readings carry the planted values
    spec = FleetSpec(devices=3, seed=7, count=50, duration_s=None, anomaly_rate=0.1)
    planted = {}
    for i in range(3):
        script = DeviceScript(spec, i, "x")
        while not script.done():
            script.next_delay()
            for out in script.next_messages(0):
                for kind, item in out.injections:
                    if kind == "anomalies":
                        planted[(item["device"], item["seq"], item["metric"])] = item["value"]
    assert run.anomalies == frozenset(planted)
    assert planted, "the seed plants anomalies"
    values = {(r.device_id, r.seq): r.metrics for r in run.readings}
    assert all(values[(d, s)][m] == v for (d, s, m), v in planted.items())
    rows = run.manifest()["injections"]["anomalies"]  # type: ignore[index]
    assert {(a["device"], a["seq"], a["metric"]) for a in rows} == run.anomalies
