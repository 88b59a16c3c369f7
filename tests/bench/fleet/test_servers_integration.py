"""bench.fleet through authenticated Mosquitto: each device of the fleet its own secret
(provisioned through the registry in one bulk), the bridge as svc/bridge, nothing anonymous."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fleet.options import from_args, parser
from bench.fleet.run import run
from bench.fleet.servers import fleet_servers
from tests.registry.mqtt_probe import connack_of

pytestmark = pytest.mark.integration

REFUSED = {0x86, 0x87}  # bad user name or password / not authorized


def test_fleet_servers_give_each_device_its_own_secret(tmp_path: Path) -> None:
    ids = [f"fleetcreds-{i:05d}" for i in range(20)]
    with fleet_servers(tmp_path / "stack", 3, ids) as found:
        creds = found.credentials
        assert creds is not None
        assert sorted(creds) == ids
        assert len(set(creds.values())) == len(ids)
        port = found.servers.mqtt_port
        assert connack_of(port, ids[3], creds[ids[3]]).value == 0
        assert connack_of(port, ids[3], creds[ids[4]]).value in REFUSED  # another's secret
        assert connack_of(port, None, None).value in REFUSED  # anonymous
        assert found.bridge_login["mqtt_username"] == "svc/bridge"
        assert Path(found.bridge_login["mqtt_password_file"]).read_text().strip()
        assert found.provision_s is not None


def test_a_short_bench_fleet_run_logs_every_device_in_with_its_own_secret(
    tmp_path: Path,
) -> None:
    args = ["--devices", "100", "--duration", "10", "--rate", "1", "--partitions", "3",
            "--processes", "2", "--sample-s", "2", "--out-dir", str(tmp_path)]  # fmt: skip
    doc = run(from_args(parser().parse_args(args)))
    assert doc["auth"] == "per-device credentials"
    verdict = doc["verdict"]
    assert verdict["failures"] == []
    assert verdict["devices_seen"] == 100
    assert verdict["missing"] == 0
    assert verdict["unique"] == verdict["sent"] > 0
    assert doc["connect"]["peak_connected"] == 100
