"""`python -m bench.commands_rtt` stays the command benchmark's entry point (Makefile, docs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench import commands_rtt
from bench.commands import cli

ROOT = Path(__file__).resolve().parents[2]


def test_entry_point_is_the_packages_main() -> None:
    assert commands_rtt.main is cli.main


def test_runs_as_a_module() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.commands_rtt", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--telemetry-rate" in proc.stdout
    assert proc.stdout.startswith("usage: python -m bench.commands_rtt")
