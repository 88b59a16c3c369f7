from __future__ import annotations

import pytest

from edge.errors import ConfigError
from edge.sizing import INFLIGHT, plan_queues


def test_queue_holds_the_outage_with_headroom() -> None:
    plan = plan_queues(600, 100, 512, 1000)
    assert plan.max_queued_messages == 600 * 100 * 5 // 4 + INFLIGHT == 75_020
    assert plan.max_queued_bytes == 75_020 * 512
    assert plan.loss_bound == 1000
    assert plan.memory_bytes > plan.max_queued_bytes


def test_fractions_round_up() -> None:
    assert plan_queues(1.0, 0.5, 10, 1, headroom=1.0).max_queued_messages == 1 + INFLIGHT


@pytest.mark.parametrize(
    "args", [(0, 1, 1, 1), (1, 0, 1, 1), (1, 1, 0, 1), (1, 1, 1, 0), (-5, 1, 1, 1)]
)
def test_nonsense_is_refused(args: tuple[float, float, int, int]) -> None:
    with pytest.raises(ConfigError):
        plan_queues(*args)
