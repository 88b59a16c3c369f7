"""A fleet of 5,000 devices, one MQTT connection each, through the real stack (issue 19).

Mosquitto (the session stack), the real bridge and Kafka; every device connects (paced by the
fleet's connect rate) and holds its own connection until the run ends, then the verifier
reads everything back: 0 lost. Bounded: about 30 s on the shared 2-core machine.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from device_sim.fleet import run_fleet
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec
from device_sim.verifier import verify

pytestmark = pytest.mark.integration

DEVICES = 5_000
COUNT = 4  # telemetry messages per device


def test_five_thousand_devices_one_connection_each_verify_with_nothing_lost(
    stack: Any, bridge_factory: Any, topic_factory: Any, tmp_path: Path
) -> None:
    telemetry, dlq = topic_factory("fleet.tel"), topic_factory("fleet.dlq")
    bridge_factory(topic_telemetry=telemetry, topic_dlq=dlq)
    spec = FleetSpec(
        devices=DEVICES,
        device_prefix=f"fleet{uuid.uuid4().hex[:8]}",
        rate=1.0,
        duration_s=None,
        count=COUNT,
        seed=19,
    )
    # 5,000 devices log in as the test account: registering each over $CONTROL would rewrite
    # Mosquitto's dynsec file 5,000 times (per-device logins: test_integration.py)
    assert stack.login is not None
    endpoints = Endpoints(
        mqtt_host=stack.mqtt_host,
        mqtt_port=stack.mqtt_port,
        mqtt_username=stack.login.username,
        mqtt_password=stack.login.password,
        kafka_bootstrap=stack.kafka_bootstrap,
        topic_telemetry=telemetry,
        topic_dlq=dlq,
    )
    # short sessions: 5,000 of them must not outlive the test in the shared Mosquitto
    options = RunOptions(processes=2, connect_rate=1_000, session_expiry_s=5, keepalive_s=60)
    peak_connected = 0

    def on_stats(snap: dict[str, Any]) -> None:
        nonlocal peak_connected
        peak_connected = max(peak_connected, snap["connected"])

    _path, doc = run_fleet(spec, endpoints, options, runs_dir=tmp_path, on_stats=on_stats)

    assert doc["status"] == "complete"
    devices = doc["devices"]
    assert len(devices) == DEVICES
    # one connection per device, all of them open at once (the start waits for every one)
    assert all(d["connects"] == 1 and d["failed"] is None for d in devices.values())
    assert peak_connected == DEVICES
    assert doc["totals"]["telemetry_sent"] == DEVICES * COUNT
    assert doc["totals"]["unacked"] == 0

    report = verify(
        doc, bootstrap=stack.kafka_bootstrap, topic_telemetry=telemetry, topic_dlq=dlq, wait_s=30
    )
    assert report.failures == []
    assert report.missing == 0
    assert report.unique == DEVICES * COUNT
    assert report.devices_seen == DEVICES
    assert report.devices_spanning_partitions == []
