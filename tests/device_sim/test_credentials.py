"""Per-device credentials: the file `iot-stack up --devices N` writes, checked before the run."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from device_sim.cli import main
from device_sim.credentials import load_credentials, require_all
from device_sim.errors import SimConfigError
from device_sim.run_config import Endpoints


def _file(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "devices.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def test_load_returns_the_map_and_refuses_malformed_files(tmp_path: Path) -> None:
    assert load_credentials(_file(tmp_path, {"dev-00000": "s0"})) == {"dev-00000": "s0"}
    bads: list[object] = [[], {"dev-00000": 1}, {"dev-00000": ""}]
    for bad in bads:
        with pytest.raises(SimConfigError, match="expected a JSON object"):
            load_credentials(_file(tmp_path, bad))
    with pytest.raises(SimConfigError, match="cannot read"):
        load_credentials(tmp_path / "absent.json")


def test_require_all_names_the_missing_devices(tmp_path: Path) -> None:
    require_all({"a": "1", "b": "2"}, ["a", "b"], tmp_path)
    with pytest.raises(SimConfigError, match=r"2 device\(s\) have no secret.*: c, d"):
        require_all({"a": "1"}, ["a", "c", "d"], tmp_path)


def test_each_device_logs_in_as_itself_with_its_own_secret() -> None:
    ends = Endpoints(credentials={"dev-00000": "s0", "dev-00001": "s1"})
    assert ends.auth_for("dev-00001") == ("dev-00001", "s1")
    assert ends.auth_for("dev-00000") == ("dev-00000", "s0")
    assert Endpoints(mqtt_username="u", mqtt_password="p").auth_for("dev-00000") == ("u", "p")
    assert Endpoints().auth_for("dev-00000") is None
    public = ends.public()
    assert public["credentials"] == 2
    assert "s0" not in str(public)


def test_run_refuses_a_fleet_with_devices_missing_from_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    creds = _file(tmp_path, {"dev-00000": "s0"})
    argv = ["run", "--devices", "2", "--credentials", str(creds), "--runs-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "dev-00001" in capsys.readouterr().err
    both = [*argv[:2], "1", *argv[3:], "--mqtt-username", "u"]
    assert main(both) == 2
    assert "exclude each other" in capsys.readouterr().err
