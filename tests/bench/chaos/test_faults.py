"""The disk-full fault's injector: it fills only a mount of the stack's own (never the disk a
plain dir is on), to the last byte, and removing its filler gives the space back. A cluster's
`kafka-controller` is the quorum's leader at fault time, `kafka-broker` a node that is not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.chaos import faults
from bench.chaos.faults import FaultError, fill, target
from bench.chaos.stack import ChaosStack
from stack.errors import StackError
from stack.kafka_layout import QuorumStatus


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


def _cluster(tmp_path: Path) -> ChaosStack:
    return ChaosStack(tmp_path, {"kafka": 20000}, False, {}, kafka_nodes=3)


def _leaders(monkeypatch: pytest.MonkeyPatch, answers: list[int | Exception]) -> list[str]:
    """The quorum answers ``answers`` in turn, the last one from then on (an exception: the
    tool failed); the bootstraps it was asked at."""
    asked = []

    def status(bootstrap: str, timeout: float = 60.0) -> QuorumStatus:
        asked.append(bootstrap)
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return QuorumStatus(answer, 7, (1, 2, 3), 0)

    monkeypatch.setattr(faults, "quorum_status", status)
    monkeypatch.setattr(faults.time, "sleep", lambda _s: None)
    return asked


@pytest.mark.parametrize(("leader", "broker"), [(1, "kafka-2"), (2, "kafka-1"), (3, "kafka-1")])
def test_the_controller_is_the_quorum_leader_and_a_broker_any_other_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leader: int, broker: str
) -> None:
    asked = _leaders(monkeypatch, [leader, leader])
    assert target(_cluster(tmp_path), "kafka-controller") == f"kafka-{leader}"
    assert target(_cluster(tmp_path), "kafka-broker") == broker
    assert asked == ["127.0.0.1:20000,127.0.0.1:20002,127.0.0.1:20004"] * 2


def test_an_election_or_a_failed_ask_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _leaders(monkeypatch, [StackError("quorum status failed"), -1, 3])
    assert target(_cluster(tmp_path), "kafka-controller") == "kafka-3"


def test_no_leader_within_the_time_is_a_fault_not_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _leaders(monkeypatch, [-1])
    with pytest.raises(FaultError, match=r"controller found within 0 s: no leader \(node -1\)"):
        faults.controller(_cluster(tmp_path), timeout=0.05)
    assert asked


def test_a_node_role_on_one_node_is_refused_and_other_services_pass(tmp_path: Path) -> None:
    single = ChaosStack(tmp_path, {"kafka": 20000}, False, {})
    with pytest.raises(FaultError, match="needs the 3-node cluster"):
        target(single, "kafka-broker")
    assert target(single, "kafka") == "kafka"
    assert target(_cluster(tmp_path), "bridge") == "bridge"
