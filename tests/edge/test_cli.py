from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.cli import main


def test_init_prints_the_plan_and_status_says_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "acct").write_text("s")
    site = tmp_path / "site"
    code = main([
        "init", "--site", "p1", "--central", "c:1883", "--account-secret-file",
        str(tmp_path / "acct"), "--site-dir", str(site), "--insecure-plain-link",
        "--outage-s", "600", "--rate-msgs-per-s", "50", "--autosave-changes", "300",
    ])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert f"queue: {600 * 50 * 5 // 4 + 20} messages" in out
    assert "fewer than 300" in out
    assert main(["status", "--dir", str(site), "--json"]) == 1  # nothing runs
    status = json.loads(capsys.readouterr().out)
    assert (status["supervisor_running"], status["link"]) == (False, "down")
    assert main(["down", "--dir", str(site)]) == 0


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--site", "p1", "--central", "c:1883", "--account-secret-file", "/x"]) == 2
    assert "TLS" in capsys.readouterr().err
    assert main(["status", "--dir", str(tmp_path)]) == 2
    assert "iot-edge init" in capsys.readouterr().err
