"""The manifest a run builds: run ids, per-device records aggregated, totals."""

from __future__ import annotations

from device_sim.manifest_builder import build_manifest, new_run_id
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec


def test_run_id_shape() -> None:
    a, b = new_run_id(), new_run_id()
    assert a != b
    assert len(a) == len("20260101T000000-abcdef")


def test_build_manifest_aggregates_devices() -> None:
    spec = FleetSpec(devices=2, malformed_rate=0.5)
    records = [
        {
            "device": "dev-00001",
            "groups": ["group-1"],
            "qos": 1,
            "skew_ms": 0,
            "silent": False,
            "sent": 10,
            "unacked": [10],
            "connects": 2,
            "failed": None,
            "commands": 3,
            "replied_ok": 2,
            "replied_error": 1,
            "ignored": 0,
            "injections": {
                "malformed": [
                    {
                        "device": "dev-00001",
                        "kind": "oversized",
                        "expected_error": "oversized",
                        "acked": True,
                    },
                    {
                        "device": "dev-00001",
                        "kind": "not_utf8",
                        "expected_error": "not_json",
                        "acked": False,
                    },
                ],
                "churn": [{"device": "dev-00001", "after_seq": 4, "down_s": 1.0}],
            },
        },
        {
            "device": "dev-00000",
            "groups": ["group-4"],
            "qos": 1,
            "skew_ms": 250,
            "silent": True,
            "sent": 9,
            "unacked": [],
            "connects": 1,
            "failed": None,
            "commands": 1,
            "replied_ok": 0,
            "replied_error": 0,
            "ignored": 1,
            "injections": {"clock_skew": [{"device": "dev-00000", "skew_ms": 250}]},
        },
    ]
    stats = {
        "published": 21,
        "malformed": 2,
        "errors": 0,
        "connects": 3,
        "first_publish": 100.0,
        "last_publish": 110.0,
    }
    doc = build_manifest(
        spec,
        "run-1",
        endpoints=Endpoints(mqtt_password="secret"),
        options=RunOptions(),
        started_at_ms=1,
        start_offsets=None,
        records=records,
        stats=stats,
        status="complete",
        ended_at_ms=2,
        cpu_seconds=1.0,
    )
    assert list(doc["devices"]) == ["dev-00000", "dev-00001"]
    assert doc["expected_dlq"] == {"oversized": 1}
    assert len(doc["injections"]["churn"]) == 1
    assert doc["commands"] == {"received": 4, "replied_ok": 2, "replied_error": 1, "ignored": 1}
    assert doc["totals"]["telemetry_sent"] == 19
    assert doc["totals"]["unacked"] == 1
    assert doc["totals"]["msgs_per_s"] == 2.1
    assert doc["totals"]["cpu_cores_per_1000_msgs_per_s"] == round(1.0 / 10 / 0.0021, 4)
    assert "mqtt_password" not in doc["endpoints"]
