"""registry.topic_ready: which new topics a metadata answer does not yet show as usable."""

from __future__ import annotations

from dataclasses import dataclass, field

from registry.topic_ready import await_leaders, unready_topics


@dataclass
class Part:
    leader: int = 1
    error: object | None = None


@dataclass
class Topic:
    partitions: dict[int, Part] = field(default_factory=lambda: {0: Part(), 1: Part()})
    error: object | None = None


@dataclass
class Meta:
    topics: dict[str, Topic]


def test_a_topic_led_on_every_partition_is_ready() -> None:
    assert unready_topics(Meta({"a": Topic(), "b": Topic()}), ["a", "b"]) == []


def test_a_topic_the_broker_does_not_know_yet_is_waited_for() -> None:
    assert unready_topics(Meta({"a": Topic()}), ["a", "b"]) == ["b"]


def test_a_topic_error_or_no_partitions_is_waited_for() -> None:
    meta = Meta({"a": Topic(error="LEADER_NOT_AVAILABLE"), "b": Topic(partitions={})})
    assert unready_topics(meta, ["a", "b"]) == ["a", "b"]


def test_a_partition_without_a_leader_or_with_an_error_is_waited_for() -> None:
    meta = Meta(
        {
            "a": Topic(partitions={0: Part(), 1: Part(leader=-1)}),
            "b": Topic(partitions={0: Part(error="NOT_LEADER")}),
            "c": Topic(),
        }
    )
    assert unready_topics(meta, ["a", "b", "c"]) == ["a", "b"]


class Admin:
    """Answers metadata from a script: the broker learns of the topic on the third ask."""

    def __init__(self, answers: list[Meta]) -> None:
        self.answers = answers
        self.asked = 0

    def list_topics(self, timeout: float) -> Meta:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


def test_await_leaders_asks_again_until_the_topic_is_led() -> None:
    admin = Admin(
        [Meta({}), Meta({"a": Topic(error="LEADER_NOT_AVAILABLE")}), Meta({"a": Topic()})]
    )
    assert await_leaders(admin, ["a"], timeout=30) == []  # type: ignore[arg-type]
    assert admin.asked == 3


def test_await_leaders_returns_what_is_still_not_led_when_time_runs_out() -> None:
    admin = Admin([Meta({"a": Topic()})])
    assert await_leaders(admin, ["a", "b"], timeout=0) == ["b"]  # type: ignore[arg-type]
    assert admin.asked == 1
