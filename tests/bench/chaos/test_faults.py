"""The disk-full fault's injector: it fills only a mount of the stack's own (never the disk a
plain dir is on), to the last byte, and removing its filler gives the space back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.chaos.faults import FaultError, fill
from bench.chaos.stack import ChaosStack


def _stack(tmp_path: Path, mounts: dict[str, Path]) -> ChaosStack:
    return ChaosStack(tmp_path, {}, False, {}, mounts=mounts)


def test_a_service_without_a_tmpfs_mount_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="bridge's data dir is no tmpfs mount"):
        fill(_stack(tmp_path, {}), "bridge")


def test_a_dir_that_is_no_mount_point_is_never_filled(tmp_path: Path) -> None:
    plain = tmp_path / "kafka"
    plain.mkdir()
    with pytest.raises(FaultError, match="is not mounted"):
        fill(_stack(tmp_path, {"kafka": plain}), "kafka")
    assert list(plain.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_fill_takes_every_byte_and_its_removal_gives_them_back(tmp_path: Path) -> None:
    mount = tmp_path / "mosquitto"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        filler = fill(_stack(tmp_path, {"mosquitto": mount}), "mosquitto")
        assert os.statvfs(mount).f_bavail == 0
        with pytest.raises(OSError, match="No space left"):
            (mount / "x").write_bytes(b"\0" * 4096)
        filler.unlink()
        (mount / "x").unlink(missing_ok=True)
        stat = os.statvfs(mount)
        assert stat.f_bavail * stat.f_frsize >= 2 * 1024 * 1024 - 4096
    finally:
        subprocess.run(["umount", str(mount)], check=True)
