from __future__ import annotations

import logging

import pytest

from api.plumbing.outage_log import OutageLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_warning_per_outage_a_reminder_per_period_and_the_recovery_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    outage = OutageLog(logging.getLogger("t"), "kafka down", every_s=30.0, clock=clock)
    caplog.set_level(logging.INFO, "t")
    outage.answered()  # nothing failed: nothing to say
    assert caplog.records == []
    for _ in range(500):  # a burst of refused requests within the period
        outage.failed("timed out")
        clock.now += 0.05
    assert [r.getMessage() for r in caplog.records] == ["kafka down: timed out"]
    assert outage.failing
    clock.now = 131.0
    outage.failed("timed out")
    assert caplog.records[-1].levelno == logging.WARNING
    assert caplog.records[-1].getMessage() == (
        "kafka down, still (31 s, 500 more refusals since the last report): timed out"
    )
    outage.answered()
    outage.answered()
    assert [r.getMessage() for r in caplog.records][2:] == [
        "kafka down: answers again after 31 s (501 refusals)"
    ]
    assert not outage.failing
    outage.failed("refused")  # a new outage is reported at once
    assert caplog.records[-1].getMessage() == "kafka down: refused"
