"""A credentialed fleet through the real stack with authentication on (issue 19).

`iot-stack up`'s provisioning gives each of 1,000 simulated devices its own secret through the
registry; the bulk goes into Mosquitto's dynsec file with Mosquitto stopped (Mosquitto 2.0.11
rewrites that file after every $CONTROL change: O(N²), 5,000 devices did not finish in 20
minutes). Then the real bridge runs, every device logs in with its own secret on its own
connection, and the verifier finds nothing lost. A wrong secret is still refused.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from device_sim.credentials import load_credentials
from device_sim.fleet import run_fleet
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec
from device_sim.verifier import verify
from stack.config import StackConfig
from stack.launcher import Stack
from stack.provisioning import provision
from stack.secret_files import device_credentials
from tests.registry.mqtt_probe import connack_of

pytestmark = pytest.mark.integration

DEVICES = 1_000
COUNT = 3  # telemetry messages per device
REFUSED = {0x86, 0x87}


def test_a_thousand_devices_with_their_own_secrets_provision_fast_and_lose_nothing(
    tmp_path: Path,
) -> None:
    base = StackConfig.servers_on_free_ports(tmp_path / "stack", partitions=3, kafka_heap="512m")
    cfg = dataclasses.replace(base, insecure_anonymous=False)
    stack = Stack(cfg)
    stack.up()  # Mosquitto with dynsec, Kafka, the registry's service accounts
    try:
        ids = [FleetSpec(devices=DEVICES).device_id(i) for i in range(DEVICES)]
        lines: list[str] = []
        started = time.monotonic()
        done = provision(
            cfg.kafka_bootstrap, cfg.connect_host, cfg.mqtt_port, cfg.secrets_dir, ids,
            progress=lines.append, offline=stack.mosquitto.apply_offline,
        )  # fmt: skip
        took = time.monotonic() - started
        print(f"provisioned {DEVICES} devices in {took:.1f} s: {lines}")
        assert done.devices_added == DEVICES
        assert any("written into Mosquitto's dynsec file" in line for line in lines)
        assert took < 300  # minutes for 1,000 over $CONTROL on this machine; seconds now
        creds = load_credentials(device_credentials(cfg.secrets_dir))
        assert len(creds) == DEVICES
        # the secrets are in no file Mosquitto reads, only their hashes
        assert creds[ids[7]] not in stack.mosquitto.dynsec_path.read_text()
        assert connack_of(cfg.mqtt_port, ids[7], "not-its-secret").value in REFUSED
        assert connack_of(cfg.mqtt_port, ids[7], creds[ids[8]]).value in REFUSED
        # a second provisioning finds everything in place (Mosquitto kept the clients)
        again = provision(
            cfg.kafka_bootstrap, cfg.connect_host, cfg.mqtt_port, cfg.secrets_dir, ids,
            offline=stack.mosquitto.apply_offline,
        )  # fmt: skip
        assert (again.devices_added, again.devices_rotated) == (0, 0)

        stack.bridge().start()
        spec = FleetSpec(devices=DEVICES, rate=1.0, duration_s=None, count=COUNT, seed=19)
        endpoints = Endpoints(
            mqtt_host=cfg.connect_host,
            mqtt_port=cfg.mqtt_port,
            kafka_bootstrap=cfg.kafka_bootstrap,
            topic_telemetry="iot.telemetry",
            topic_dlq="iot.dlq",
            credentials=creds,
        )
        options = RunOptions(processes=2, connect_rate=500, session_expiry_s=30)
        _path, doc = run_fleet(spec, endpoints, options, runs_dir=tmp_path / "runs")
        devices: dict[str, Any] = doc["devices"]
        assert all(d["connects"] == 1 and d["failed"] is None for d in devices.values())
        assert doc["totals"]["telemetry_sent"] == DEVICES * COUNT
        report = verify(
            doc,
            bootstrap=cfg.kafka_bootstrap,
            topic_telemetry="iot.telemetry",
            topic_dlq="iot.dlq",
            wait_s=60,
            workers=2,  # the parallel verifier (3 partitions shared by 2 processes)
        )
        assert report.failures == []
        assert report.missing == 0
        assert report.unique == DEVICES * COUNT
        assert report.devices_seen == DEVICES
    finally:
        stack.down()
