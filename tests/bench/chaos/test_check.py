"""The chaos cell's tally (bench/chaos/check.py): lost and duplicated by client path."""

from __future__ import annotations

from collections import Counter

from bench.chaos.check import Tally


def test_lost_is_acknowledged_and_never_delivered_duplicates_only_confirmed_deliveries() -> None:
    tally = Tally()
    # seq 3: delivered, its ack failed (maybe recorded: never back); seq 4: nowhere
    tally.add("queue", {1, 2, 3, 4}, Counter({1: 1, 2: 2}), frozenset({3}))
    assert tally.lost == {"queue": 1}
    assert tally.duplicates == {"queue": 1}


def test_without_unsure_deliveries_every_missing_seq_is_lost() -> None:
    tally = Tally()
    tally.add("mr", {1, 2, 3}, Counter({1: 1, 5: 2}))  # 5: not acknowledged, not counted
    assert tally.lost == {"mr": 2}
    assert tally.duplicates == {"mr": 0}
