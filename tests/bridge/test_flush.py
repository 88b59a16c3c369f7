"""The adaptive linger's decisions, on an injected clock (no sleeps)."""

from __future__ import annotations

import pytest

from bridge.flush import AdaptiveLinger, LingerPolicy

POLICY = LingerPolicy(min_s=0.0, max_s=0.02, low_rate=2_000, high_rate=40_000, rate_window_s=0.1)


def test_linger_grows_with_the_rate_and_stops_above_the_high_rate() -> None:
    assert POLICY.linger_for(0) == 0.0
    assert POLICY.linger_for(2_000) == 0.0
    assert POLICY.linger_for(21_000) == pytest.approx(0.01)
    assert POLICY.linger_for(40_000) == pytest.approx(0.02)
    assert POLICY.linger_for(40_001) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_s": 0.03, "max_s": 0.02},
        {"min_s": -1.0},
        {"low_rate": 5.0, "high_rate": 5.0},
        {"rate_window_s": 0.0},
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"need|must"):
        LingerPolicy(**kwargs)


def test_a_lone_message_at_a_low_rate_is_flushed_at_the_next_tick() -> None:
    linger = AdaptiveLinger(POLICY, now=0.0)
    assert not linger.due(0.5, produced=0)  # nothing produced: nothing to flush
    assert linger.due(0.501, produced=1)  # one message, rate ~2/s: min_s = 0 -> now
    linger.flushed(1)
    assert not linger.due(0.502, produced=1)  # already pushed out


def test_a_higher_rate_waits_for_the_rate_dependent_linger() -> None:
    linger = AdaptiveLinger(POLICY, now=0.0)
    # 21,000 msgs/s over the first window: effective linger 10 ms
    assert not linger.due(0.1, produced=2_100)
    assert linger.rate == pytest.approx(21_000)
    assert not linger.due(0.105, produced=2_200)  # 5 ms since the tick that saw them
    assert linger.due(0.1101, produced=2_300)  # 10 ms: due
    linger.flushed(2_300)
    assert not linger.due(0.111, produced=2_300)
    assert not linger.due(0.112, produced=2_301)  # a new message starts a new wait
    assert linger.due(0.1221, produced=2_400)


def test_above_the_high_rate_the_producer_lingers_on_its_own() -> None:
    linger = AdaptiveLinger(POLICY, now=0.0)
    assert not linger.due(0.1, produced=5_000)  # 50,000 msgs/s
    assert not linger.due(0.2, produced=10_000)
    # the rate falls to 1,000 msgs/s: what the producer lingered on before is not flushed
    # on that account; new messages are, at once
    assert not linger.due(0.325, produced=10_000)
    assert linger.rate == 0
    assert linger.due(0.326, produced=10_001)


def test_the_rate_is_measured_per_window() -> None:
    linger = AdaptiveLinger(POLICY, now=10.0)
    linger.due(10.0625, produced=100)
    assert linger.rate == 0  # the first window (0.1 s) is not complete
    linger.due(10.125, produced=375)
    assert linger.rate == pytest.approx(3_000)
    linger.due(10.375, produced=625)  # 250 more in 0.25 s
    assert linger.rate == pytest.approx(1_000)
