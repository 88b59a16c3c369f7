"""When a long-lived consumer's fetch has wedged: records wait and none arrive (issue 32)."""

from __future__ import annotations

from api.plumbing.fetch_stall import FetchStall


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch() -> tuple[FetchStall[str], Clock]:
    clock = Clock()
    return FetchStall(10.0, clock), clock


def test_records_waiting_with_no_position_moving_for_stall_s_is_a_stall() -> None:
    watch, clock = _watch()
    assert not watch.check({"a": 5, "b": 3}, {"a": 5, "b": 3})  # caught up
    assert not watch.behind
    clock.now += 1
    assert not watch.check({"a": 5, "b": 3}, {"a": 5, "b": 9})  # b's records wait
    assert watch.behind
    clock.now += 9.9
    assert not watch.check({"a": 5, "b": 3}, {"a": 5, "b": 9})
    clock.now += 0.1
    assert watch.check({"a": 5, "b": 3}, {"a": 5, "b": 12})  # 10 s behind, nothing moved


def test_a_consumer_that_keeps_reading_is_never_stalled_however_far_behind() -> None:
    watch, clock = _watch()
    for at in range(0, 1000, 10):  # a backlog it works through, always behind
        clock.now += 8
        assert not watch.check({"a": at}, {"a": 5000})
    assert watch.behind


def test_a_quiet_topic_is_never_stalled() -> None:
    watch, clock = _watch()
    for _ in range(10):
        clock.now += 60
        assert not watch.check({"a": 7}, {"a": 7})
    # a partition whose watermark was not read is not held against it
    clock.now += 60
    assert not watch.check({"a": 7}, {})
    assert not watch.behind


def test_catching_up_or_a_new_consumer_starts_the_count_again() -> None:
    watch, clock = _watch()
    watch.check({"a": 1}, {"a": 4})
    clock.now += 8
    assert not watch.check({"a": 4}, {"a": 4})  # caught up: not behind
    clock.now += 1
    watch.check({"a": 4}, {"a": 6})
    clock.now += 8
    assert not watch.check({"a": 4}, {"a": 6})  # behind 8 s only, not 17
    watch.reset()
    clock.now += 5
    assert not watch.check({"a": 4}, {"a": 6})
    assert watch.behind  # counted from the new consumer's first check
    clock.now += 10
    assert watch.check({"a": 4}, {"a": 6})
