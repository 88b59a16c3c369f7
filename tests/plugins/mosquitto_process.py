"""A Mosquitto of a test's own, from a config the test wrote: started, waited for until its
listener accepts, and stopped after (tests/registry's dynsec broker, the bench sinks' bare one)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stack.ports import port_open


@contextmanager
def running_mosquitto(conf: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`mosquitto -c conf` once it accepts on 127.0.0.1:``port``; the test fails with ``log``'s
    text if it exits or does not listen within 20 s."""
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)])
    deadline = time.monotonic() + 20
    while not port_open("127.0.0.1", port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"mosquitto did not start: {log.read_text() if log.exists() else ''}")
        time.sleep(0.05)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
