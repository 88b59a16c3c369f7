from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from edge.config import EdgeConfig
from edge.errors import ConfigError
from edge.install import install


def _config(tmp_path: Path, devices: object) -> EdgeConfig:
    (tmp_path / "acct").write_text("acct-secret\n")
    (tmp_path / "devices.json").write_text(json.dumps(devices))
    return EdgeConfig(
        site="p1", central="c:1", account_secret_file=str(tmp_path / "acct"),
        devices_file=str(tmp_path / "devices.json"), site_dir=str(tmp_path / "site"),
        insecure_plain_link=True,
    )  # fmt: skip


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_modes(tmp_path: Path) -> None:
    paths = install(_config(tmp_path, {"d1": "dev-secret"}))
    assert _mode(paths.root) == 0o700
    for secret_file in (paths.conf, paths.passwd, paths.monitor_secret):
        assert _mode(secret_file) == 0o600
    assert "remote_password acct-secret" in paths.conf.read_text()
    assert "dev-secret" not in paths.passwd.read_text()
    assert json.loads((paths.root / "site.json").read_text())["site"] == "p1"
    monitor = paths.monitor_secret.read_text()
    install(_config(tmp_path, {"d1": "dev-secret", "d2": "x"}))  # re-init keeps the monitor
    assert paths.monitor_secret.read_text() == monitor
    assert "topic devices/d2/commands/# in 1" in paths.conf.read_text()


@pytest.mark.parametrize("devices", [["d1"], {"d1": 5}, {"d1": ""}])
def test_devices_file_must_map_ids_to_secrets(tmp_path: Path, devices: object) -> None:
    with pytest.raises(ConfigError, match="devices file"):
        install(_config(tmp_path, devices))
