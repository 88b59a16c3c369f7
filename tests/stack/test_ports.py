"""The port pool (stack/ports.py): the ports of one test run never repeat, whoever asks."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stack import ports


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pool"
    monkeypatch.setenv(ports.PORT_POOL_ENV, str(path))
    return path


def test_pooled_ports_are_distinct_and_below_the_ephemeral_range(pool: Path) -> None:
    got = ports.free_ports(50) + [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 100
    assert all(ports.POOL_FIRST <= p <= ports.POOL_LAST for p in got)


def test_a_taken_port_is_skipped(pool: Path) -> None:
    pool.write_text(str(ports.POOL_FIRST + 100))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports.POOL_FIRST + 100))
        squatter.listen()
        assert ports.free_port() != ports.POOL_FIRST + 100


def test_a_run_is_consecutive_and_starts_again_past_a_taken_port(pool: Path) -> None:
    pool.write_text(str(ports.POOL_FIRST + 200))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports.POOL_FIRST + 202))
        squatter.listen()
        base = ports.free_port_run(4)
    assert base >= ports.POOL_FIRST + 203


def test_the_pool_wraps_at_its_end(pool: Path) -> None:
    pool.write_text(str(ports.POOL_LAST - 1))
    last_two = ports.free_ports(3)  # the pool's last two (if free), then from its start again
    assert ports.POOL_FIRST <= last_two[-1] < ports.POOL_FIRST + 1000 < last_two[0]


def test_another_process_continues_where_this_one_stopped(pool: Path) -> None:
    mine = ports.free_ports(3)
    code = "from stack.ports import free_ports; print(*free_ports(3))"
    theirs = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not set(mine) & {int(p) for p in theirs}
    assert min(int(p) for p in theirs) > max(mine)


def test_without_a_pool_the_os_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ports.PORT_POOL_ENV, raising=False)
    assert len(set(ports.free_ports(5))) == 5
