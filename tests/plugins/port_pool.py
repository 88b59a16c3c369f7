"""One port pool for the whole test run (stack/ports.py): every free port a test, a worker or a
server it starts asks for comes from one shared, locked sequence below Linux's ephemeral range,
so two xdist workers, or a test and the `iot-stack up` it runs, never pick the same port, and no
outgoing connection takes a chosen port before its server binds it."""

from __future__ import annotations

import contextlib
import os
import random
import tempfile

import pytest

from stack.ports import POOL_FIRST, POOL_LAST, PORT_POOL_ENV

_OWNED = "_iot_port_pool_owned"


def pytest_configure(config: pytest.Config) -> None:
    # The first pytest process of the run (the xdist controller, or the only one) makes the
    # pool; the workers it spawns afterwards, and every server started from them, inherit it.
    if os.environ.get(PORT_POOL_ENV):
        return
    fd, path = tempfile.mkstemp(prefix="iot-port-pool-")
    # each run starts at a random point of the range: runs of other sessions on the same
    # machine have pools of their own, and all starting at POOL_FIRST they picked the same
    # ports within seconds of each other (a port free when chosen, bound by the other run's
    # server before ours started)
    os.write(fd, str(random.randrange(POOL_FIRST, POOL_LAST - 1000)).encode())
    os.close(fd)
    os.environ[PORT_POOL_ENV] = path
    setattr(config, _OWNED, path)


def pytest_unconfigure(config: pytest.Config) -> None:
    path = getattr(config, _OWNED, None)
    if path is not None:
        os.environ.pop(PORT_POOL_ENV, None)
        with contextlib.suppress(OSError):
            os.unlink(path)
