"""stack.topics: the design's topic specs."""

from __future__ import annotations

from stack.topics import DESIGN_TOPICS, TopicSpec


def test_a_compacted_spec_sets_the_cleanup_policy_unless_given() -> None:
    assert TopicSpec("t", compacted=True).topic_config() == {"cleanup.policy": "compact"}
    spec = TopicSpec("t", compacted=True, config={"cleanup.policy": "compact,delete"})
    assert spec.topic_config() == {"cleanup.policy": "compact,delete"}


def test_the_design_keeps_status_and_presence_compacted() -> None:
    compacted = {s.name for s in DESIGN_TOPICS if s.compacted}
    assert compacted == {"iot.command-status", "iot.presence"}
