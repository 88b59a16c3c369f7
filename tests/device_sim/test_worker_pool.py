"""The pool's bookkeeping of what workers send: stats merged live, results, failures, deaths."""

from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Any

from device_sim.worker_pool import _Gathered


@dataclass
class FakeProc:
    alive: bool
    exitcode: int | None = None

    def is_alive(self) -> bool:
        return self.alive


def test_stats_are_merged_as_they_come_and_results_end_a_worker() -> None:
    seen: list[dict[str, Any]] = []
    g = _Gathered(seen.append)
    g.take(("stats", 0, {"published": 2}))
    g.take(("stats", 1, {"published": 3}))
    g.take(("stats", 0, {"published": 5}))  # a newer snapshot replaces the older one
    assert [s["published"] for s in seen] == [2, 5, 8]
    g.take(("result", 0, [{"device": "dev-00000"}], 1.5))
    g.take(("error", 1, "OSError: boom", 0.0))
    assert g.done == {0, 1}
    assert g.records == [{"device": "dev-00000"}]
    assert g.cpu == 1.5
    assert g.errors == ["worker 1: OSError: boom"]


def test_a_dead_worker_without_a_result_is_a_failure() -> None:
    g = _Gathered(None)
    out: queue.Queue[Any] = queue.Queue()
    procs = [FakeProc(alive=True), FakeProc(alive=False, exitcode=-9)]
    g.reap(procs, out)
    assert g.done == {1}
    assert g.errors == ["worker 1 exited with -9"]
    out.put(("result", 0, [], 0.0))
    procs[0].alive = False
    g.reap(procs, out)  # its result is still queued: not a failure yet
    assert g.done == {1}
