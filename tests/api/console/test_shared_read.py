"""Callers that come while a read is under way share its answer or its error."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from api.console.shared_read import SharedRead


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
        time.sleep(0.1)  # they wait on the read under way
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
        time.sleep(0.1)
        gate.set()
        for future in (first, second):
            with pytest.raises(TimeoutError):
                future.result(5)
    assert shared() == "ok"
