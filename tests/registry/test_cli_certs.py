"""``iot-devices ca`` / ``cert``: parsing and the commands that need only the CA directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry import cli_certs
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


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*"))


@pytest.mark.parametrize(
    "command",
    [
        ["cert", "pump-1", "--out", "{tmp}/out"],
        ["cert", "revoke", "pump-1"],
        ["cert", "list"],
        ["ca", "crl"],
        ["ca", "server-cert"],
        ["ca", "show"],
    ],
)
def test_a_folder_without_a_ca_is_refused_and_nothing_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    """Issue 37: no CA made on the fly. `cert` against a folder without a CA (here one that
    exists, empty, and one that does not) says so, names the stack's CA it finds (its data dir
    holds `secrets/` beside `ca/`), writes no file anywhere and asks no Kafka (none runs)."""
    monkeypatch.delenv("IOT_TLS_CA_DIR", raising=False)
    stack_dir = tmp_path / "stack-var"
    assert main([f"--ca-dir={stack_dir / 'ca'}", "ca", "init"]) == 0
    (stack_dir / "secrets").mkdir()
    admin = stack_dir / "secrets" / "registry-admin.secret"
    admin.write_text("s\n")
    work = tmp_path / "checkout"
    (work / "var").mkdir(parents=True)
    capsys.readouterr()
    before = _files(tmp_path)
    for ca_dir in (work / "var" / "ca", work / "var"):  # missing, and present without a CA
        argv = [a.format(tmp=work) for a in command]
        code = main(
            ["--kafka-bootstrap=127.0.0.1:9", f"--admin-password-file={admin}",
             f"--ca-dir={ca_dir}", *argv]
        )  # fmt: skip
        err = capsys.readouterr().err
        assert code == 1
        assert f"no CA in {ca_dir}" in err
        assert "nothing written" in err
        assert f"--ca-dir {stack_dir / 'ca'}" in err  # the stack's CA, found and named
        assert "ca init" in err
        assert _files(tmp_path) == before


def test_without_a_ca_anywhere_the_error_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOT_TLS_CA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr(cli_certs, "CHECKOUT_CA", tmp_path / "checkout-ca")
    code = main(["--kafka-bootstrap=127.0.0.1:9", f"--ca-dir={tmp_path / 'ca'}",
                 "cert", "pump-1"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "no CA found where a stack keeps one" in err
    assert list(tmp_path.iterdir()) == []


def test_ca_init_names_another_ca_it_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOT_TLS_CA_DIR", str(tmp_path / "stack-ca"))
    assert main([f"--ca-dir={tmp_path / 'stack-ca'}", "ca", "init"]) == 0
    capsys.readouterr()
    assert main([f"--ca-dir={tmp_path / 'other'}", "ca", "init"]) == 0  # explicit: made
    out, err = capsys.readouterr()
    assert "created" in out
    assert f"another CA exists in {tmp_path / 'stack-ca'}" in err
