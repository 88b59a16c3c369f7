"""One port pool for every test run on this machine (stack/ports.py): every free port a test, a
worker or a server it starts asks for comes from one shared, locked sequence below Linux's
ephemeral range, so two xdist workers, a test and the `iot-stack up` it runs, or two test runs
side by side (worktrees) never pick the same port, and no outgoing connection takes a chosen
port before its server binds it.

The pool's file is machine-wide and kept between runs: a pool per run made every run hand out
20000, 20001, ... in the same order, so two runs side by side collided on nearly every port
(a session stack failed to start in 2 of 3 runs beside four others, 2026-11-28)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from stack.ports import PORT_POOL_ENV

MACHINE_POOL = Path(tempfile.gettempdir()) / "iot-test-port-pool"


def pytest_configure(config: pytest.Config) -> None:
    # The first pytest process of the run (the xdist controller, or the only one) names the
    # pool; the workers it spawns afterwards, and every server started from them, inherit it.
    # A pool already in the environment (a test running pytest, an operator's choice) is kept.
    os.environ.setdefault(PORT_POOL_ENV, str(MACHINE_POOL))
