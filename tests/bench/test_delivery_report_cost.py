"""The delivery-report cost benchmark produces to a real Kafka and waits for every report."""

from __future__ import annotations

from typing import Any

import pytest

from bench.delivery_report_cost import TOPIC, measure


@pytest.mark.integration
def test_each_mode_produces_everything_and_reports_a_cost(stack: Any) -> None:
    from stack.topics import TopicSpec, ensure_topics

    ensure_topics(stack.kafka_bootstrap, [TopicSpec(TOPIC)], 3)
    for every in (1, 10, 0):
        assert measure(stack.kafka_bootstrap, 2000, every, payload_bytes=100) > 0
