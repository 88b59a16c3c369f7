"""The in-process hot-path benchmark runs the real decoder, pipeline and acks end to end."""

from __future__ import annotations

from bench.hotpath import measure


def test_every_message_is_acknowledged_and_timed() -> None:
    figures = measure(messages=3000, payload_bytes=200, rounds=1)
    assert len(figures) == 1
    assert figures[0] > 0  # measure() raises unless all 3,000 were acknowledged
