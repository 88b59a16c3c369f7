"""Unit tests: command attempts published within Mosquitto's in-flight limit, with a fake pool."""

from __future__ import annotations

from typing import Any

from commands.actions import PublishAction
from commands.model import Command, Source, Target
from commands.publisher import CommandPublisher
from commands.tracker import Tracker


class FakePool:
    def __init__(self) -> None:
        self.published: list[tuple[str, str]] = []

    def publish(self, key: str, topic: str, payload: bytes, properties: bytes) -> int:
        self.published.append((key, topic))
        return len(self.published)


def command(cid: str, device: str = "d1") -> Command:
    return Command(cid, Target(device_id=device), "reboot", {}, 1_000, 3, True, 0, 60_000)


def rig(limit: int) -> tuple[CommandPublisher, Tracker, FakePool, dict[str, int]]:
    tracker = Tracker()
    stats = {"published": 0}
    publisher = CommandPublisher(tracker, lambda: 1_000, stats, limit)
    pool = FakePool()
    publisher.link = pool  # type: ignore[assignment]
    return publisher, tracker, pool, stats


def admitted(tracker: Tracker, cid: str) -> PublishAction:
    actions: list[Any] = tracker.admit(command(cid), 1_000, Source(0, 0))
    return next(a for a in actions if isinstance(a, PublishAction))


def test_publishes_beyond_the_limit_wait_and_go_out_in_order_on_pubacks() -> None:
    publisher, tracker, pool, stats = rig(limit=1)
    for cid in ("c1", "c2", "c3"):
        publisher.publish(admitted(tracker, cid))
    assert [t for _, t in pool.published] == ["devices/d1/commands/reboot"]
    assert publisher.held == 2
    assert publisher.acked(1) == ("c1", 1)
    assert publisher.acked(1) is None
    publisher.release_held()
    assert len(pool.published) == 2
    assert publisher.held == 1
    assert stats["published"] == 2


def test_a_held_attempt_the_tracker_moved_past_is_dropped() -> None:
    publisher, tracker, pool, _ = rig(limit=1)
    publisher.publish(admitted(tracker, "c1"))
    held = admitted(tracker, "c2")
    publisher.publish(held)
    tracker.tick(10_000)  # c2's attempt 1 timed out: attempt 2 is the live one
    publisher.acked(1)
    publisher.release_held()
    assert len(pool.published) == 1
    assert publisher.held == 0
