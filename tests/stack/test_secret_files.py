"""Secret files: 0600 from the first byte, replaced whole, read back."""

from __future__ import annotations

import stat
from pathlib import Path

from stack.secret_files import read_credentials, read_secret, write_credentials, write_secret


def test_secrets_are_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "bridge.secret"
    assert read_secret(path) is None
    write_secret(path, "s3cret")
    assert read_secret(path) == "s3cret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    write_secret(path, "rotated")
    assert read_secret(path) == "rotated"
    assert [p.name for p in path.parent.iterdir()] == ["bridge.secret"]  # no temp file left


def test_credentials_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "devices.json"
    assert read_credentials(path) == {}
    write_credentials(path, {"dev-00001": "b", "dev-00000": "a"})
    assert read_credentials(path) == {"dev-00000": "a", "dev-00001": "b"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
