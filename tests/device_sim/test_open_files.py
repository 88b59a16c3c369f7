"""raise_open_files, run in child processes so this test's own limit is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAP_SYS_RESOURCE = 24

PROBE = """
import resource, sys
from device_sim.open_files import raise_open_files
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
got = raise_open_files(int(sys.argv[3]))
print(got, *resource.getrlimit(resource.RLIMIT_NOFILE))
"""


def _probe(soft: int, hard: int, wanted: int) -> tuple[int, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(soft), str(hard), str(wanted)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout.split()
    got, new_soft, new_hard = (int(x) for x in out)
    return got, new_soft, new_hard


def test_soft_limit_rises_to_wanted_below_the_hard_limit() -> None:
    assert _probe(256, 4096, 2000) == (2000, 2000, 4096)


def test_a_limit_already_high_enough_is_left_alone() -> None:
    assert _probe(3000, 4096, 2000) == (3000, 3000, 4096)


def _may_raise_hard_limit() -> bool:
    """CAP_SYS_RESOURCE (bit 24) in the effective set (root in a container may lack it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def test_above_the_hard_limit_a_privileged_process_raises_both_others_stop_at_hard() -> None:
    if _may_raise_hard_limit():
        assert _probe(256, 4096, 50_000) == (50_000, 50_000, 50_000)
    else:
        assert _probe(256, 4096, 50_000) == (4096, 4096, 4096)
