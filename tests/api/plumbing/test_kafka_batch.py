"""`take`: the first record as soon as it is there, then only what is already fetched."""

from __future__ import annotations

from collections import deque

from api.plumbing.kafka_batch import take


class FakeConsumer:
    """A consumer whose fetched records are `ready`; `later` arrive during a blocking wait.

    Like librdkafka's ``consume``, a blocking ``consume`` waits its whole timeout unless it gets
    ``num_messages`` records (the behaviour `take` avoids)."""

    def __init__(self, ready: list[str], later: list[str] | None = None) -> None:
        self.ready = deque(ready)
        self.later = list(later or [])
        self.calls: list[tuple[str, int, float]] = []
        self.waited = 0.0

    def _arrive(self) -> None:
        self.ready.extend(self.later)
        self.later.clear()

    def poll(self, timeout: float = -1) -> str | None:
        self.calls.append(("poll", 1, timeout))
        if not self.ready:
            self._arrive()
            if not self.ready:
                self.waited += timeout
                return None
        return self.ready.popleft()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[str]:
        self.calls.append(("consume", num_messages, timeout))
        if timeout > 0:
            self._arrive()
            if len(self.ready) < num_messages:
                self.waited += timeout
        return [self.ready.popleft() for _ in range(min(num_messages, len(self.ready)))]


def test_a_record_arriving_during_the_wait_returns_without_waiting_for_more() -> None:
    consumer = FakeConsumer([], later=["a"])
    assert take(consumer, 1000, 2.0) == ["a"]
    assert consumer.waited == 0.0
    assert consumer.calls == [("poll", 1, 2.0), ("consume", 999, 0)]


def test_what_is_already_fetched_comes_in_one_batch_up_to_the_count() -> None:
    consumer = FakeConsumer(["a", "b", "c", "d"])
    assert take(consumer, 3, 1.0) == ["a", "b", "c"]
    assert take(consumer, 3, 1.0) == ["d"]
    assert consumer.waited == 0.0


def test_nothing_within_the_timeout_is_an_empty_batch_after_one_wait() -> None:
    consumer = FakeConsumer([])
    assert take(consumer, 10, 0.5) == []
    assert consumer.calls == [("poll", 1, 0.5)]
    assert consumer.waited == 0.5


def test_no_timeout_never_blocks() -> None:
    consumer = FakeConsumer(["a", "b"], later=["c"])
    assert take(consumer, 10, 0.0) == ["a", "b"]
    assert consumer.calls == [("consume", 10, 0)]
    assert take(consumer, 10, -1.0) == []  # `later` never arrives without a wait


def test_a_count_of_one_polls_once_and_zero_asks_nothing() -> None:
    consumer = FakeConsumer(["a", "b"])
    assert take(consumer, 1, 1.0) == ["a"]
    assert consumer.calls == [("poll", 1, 1.0)]
    assert take(consumer, 0, 1.0) == []
    assert consumer.calls == [("poll", 1, 1.0)]
