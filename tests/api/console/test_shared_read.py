"""Callers that come while a read is under way share its answer or its error."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest

from api.console.shared_read import SharedRead


def _inside(callers: int) -> None:
    """Until ``callers`` threads are inside a SharedRead call (the reader and its sharers),
    seen on their stacks rather than guessed by a sleep (a loaded host starts threads late)."""
    code = SharedRead.__call__.__code__
    deadline = time.monotonic() + 10
    while (
        sum(
            any(f.f_code is code for f, _ in traceback.walk_stack(frame))
            for frame in sys._current_frames().values()
        )
        < callers
    ):
        assert time.monotonic() < deadline, "the callers never came in"
        time.sleep(0.01)


def test_callers_during_a_read_share_it_and_a_later_caller_reads_again() -> None:
    reads: list[int] = []
    gate = threading.Event()

    def read() -> int:
        reads.append(len(reads))
        gate.wait(5)
        return len(reads)

    shared = SharedRead(read)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(shared)
        while not reads:
            time.sleep(0.01)
        others = [pool.submit(shared) for _ in range(3)]
        _inside(4)  # they wait on the read under way
        gate.set()
        assert first.result(5) == 1
        assert [f.result(5) for f in others] == [1, 1, 1]
    assert reads == [0]
    assert shared() == 2  # none under way: a read of its own


def test_a_failed_read_raises_in_every_caller_that_shared_it_and_the_next_reads_again() -> None:
    gate = threading.Event()
    calls = []

    def read() -> str:
        calls.append(1)
        if len(calls) == 1:
            gate.wait(5)
            raise TimeoutError("Kafka does not answer")
        return "ok"

    shared = SharedRead(read)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(shared)
        while not calls:
            time.sleep(0.01)
        second = pool.submit(shared)
        _inside(2)
        gate.set()
        for future in (first, second):
            with pytest.raises(TimeoutError):
                future.result(5)
    assert shared() == "ok"
