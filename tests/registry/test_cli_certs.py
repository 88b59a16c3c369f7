"""``iot-devices ca`` / ``cert``: parsing and the commands that need only the CA directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry.cli import main
from registry.cli_certs import normalise_argv


def test_cert_device_means_cert_issue() -> None:
    assert normalise_argv(["cert", "pump-1", "--days", "3"]) == [
        "cert", "issue", "pump-1", "--days", "3",
    ]  # fmt: skip
    assert normalise_argv(["--json", "cert", "--tenant", "t", "p"])[:3] == [
        "--json", "cert", "issue",
    ]  # fmt: skip
    for action in ("issue", "revoke", "list", "--help"):
        assert normalise_argv(["cert", action]) == ["cert", action]
    assert normalise_argv(["device", "show", "x"]) == ["device", "show", "x"]


def test_ca_commands_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca = f"--ca-dir={tmp_path / 'ca'}"
    assert main([ca, "ca", "mosquitto-conf"]) == 1  # no CA yet: no lines naming missing files
    assert "ca init" in capsys.readouterr().err
    assert main([ca, "ca", "init", "--server-name", "iot.example"]) == 0
    assert "created" in capsys.readouterr().out
    assert main([ca, "ca", "init"]) == 0
    assert "kept the existing" in capsys.readouterr().out
    assert main([ca, "--json", "ca", "show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["issued"] == 0
    assert "iot-appliance" in shown["subject"]
    assert main([ca, "ca", "mosquitto-conf", "--port", "18883"]) == 0
    assert capsys.readouterr().out.startswith("listener 18883\n")
    assert main([ca, "ca", "crl"]) == 0
    assert "SIGHUP" in capsys.readouterr().out
    assert main([ca, "--json", "cert", "list"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main([ca, "cert", "revoke", "pump-1", "--serial", "abc"]) == 1
    assert "not pump-1's" in capsys.readouterr().err


def test_operator_ca_needs_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca = f"--ca-dir={tmp_path / 'ca'}"
    assert main([ca, "ca", "init", "--ca-cert", str(tmp_path / "x.crt")]) == 2
    assert "go together" in capsys.readouterr().err
