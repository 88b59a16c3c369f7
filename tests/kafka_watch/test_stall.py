"""The stall judgement of a long-lived consumer (pure: positions and watermarks as given)."""

from __future__ import annotations

import pytest

from kafka_watch.stall import StallJudge, StallTally

A, B = ("t", 0), ("t", 1)


def test_behind_without_progress_for_stall_s_is_stalled() -> None:
    judge = StallJudge("c", 30.0)
    assert judge.check(0.0, {A: 5}, {A: 9}) == []  # behind: the clock starts
    assert judge.check(10.0, {A: 5}, {A: 12}) == []
    assert judge.failures == 1  # behind without progress since the last check
    assert judge.check(29.9, {A: 5}, {A: 12}) == []
    assert judge.check(30.0, {A: 5}, {A: 12}) == [A]


def test_progress_restarts_the_clock() -> None:
    judge = StallJudge("c", 30.0)
    judge.check(0.0, {A: 5}, {A: 100})
    assert judge.check(25.0, {A: 6}, {A: 100}) == []  # it moved: catching up is no stall
    assert judge.failures == 0
    assert judge.check(50.0, {A: 6}, {A: 100}) == []
    assert judge.check(55.0, {A: 6}, {A: 100}) == [A]


def test_idle_at_the_high_watermark_is_never_stalled() -> None:
    judge = StallJudge("c", 30.0)
    for now in (0.0, 100.0, 1000.0):
        assert judge.check(now, {A: 9}, {A: 9}) == []
    assert judge.failures == 0
    # records arrive: only from then on does the clock run
    assert judge.check(1001.0, {A: 9}, {A: 10}) == []
    assert judge.check(1030.0, {A: 9}, {A: 10}) == []
    assert judge.check(1031.0, {A: 9}, {A: 10}) == [A]


def test_caught_up_in_between_restarts_the_clock() -> None:
    judge = StallJudge("c", 30.0)
    judge.check(0.0, {A: 5}, {A: 9})
    judge.check(20.0, {A: 9}, {A: 9})  # read it all
    assert judge.check(25.0, {A: 9}, {A: 12}) == []
    assert judge.check(54.0, {A: 9}, {A: 12}) == []
    assert judge.check(55.0, {A: 9}, {A: 12}) == [A]


def test_only_the_stuck_partitions_are_named_and_unknown_ones_are_skipped() -> None:
    judge = StallJudge("c", 10.0)
    judge.check(0.0, {A: 1, B: 1}, {A: 5, B: 5, ("u", 0): 7})
    assert judge.check(10.0, {A: 1, B: 3}, {A: 5, B: 5, ("u", 0): 7}) == [A]
    assert judge.check(20.0, {A: 1, B: 3}, {A: 5, B: -1}) == [A]  # B unknown now
    assert judge.check(30.0, {A: -1001, B: 3}, {A: 5, B: 5}) == []  # no position: unknown


def test_renewed_counts_and_judges_the_new_consumer_afresh() -> None:
    judge = StallJudge("c", 10.0)
    judge.check(0.0, {A: 1}, {A: 5})
    assert judge.check(10.0, {A: 1}, {A: 5}) == [A]
    judge.renewed()
    assert (judge.renewals, judge.failures) == (1, 0)
    assert judge.check(11.0, {A: 1}, {A: 5}) == []  # the new consumer at the same position
    assert judge.check(20.0, {A: 1}, {A: 5}) == []
    assert judge.check(21.0, {A: 1}, {A: 5}) == [A]
    judge.reset()  # a re-assignment: not counted
    assert (judge.renewals, judge.failures) == (1, 0)
    assert judge.check(22.0, {A: 1}, {A: 5}) == []


def test_stall_s_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stall_s"):
        StallJudge("c", 0)


def test_checks_are_due_every_third_of_the_stall_time_at_most_ten_seconds_after_assignment() -> (
    None
):
    judge = StallJudge("t", 6.0)
    judge.assigned(100.0)
    assert [judge.due(t) for t in (101.0, 101.9, 102.0, 103.0, 104.0)] == [
        False, False, True, False, True,
    ]  # fmt: skip
    judge.assigned(200.0)  # a new consumer: its own first interval
    assert not judge.due(201.0)
    assert StallJudge("t", 90.0).every_s == 10.0


def test_a_tally_counts_many_consumers_under_one_name() -> None:
    judges = [StallJudge("a", 10.0), StallJudge("b", 10.0)]
    tally = StallTally("mr-consumers", lambda: judges)
    assert (tally.name, tally.renewals, tally.failures) == ("mr-consumers", 0, 0)
    judges[0].check(0.0, {A: 1, B: 1}, {A: 5, B: 5})
    judges[0].check(5.0, {A: 1, B: 1}, {A: 5, B: 5})  # both behind without progress
    judges[1].check(0.0, {A: 1}, {A: 5})
    judges[1].check(5.0, {A: 1}, {A: 5})
    assert tally.failures == 3
    judges.pop()
    assert tally.failures == 2
