"""The queue settings reader's stall check (api/queues/settings.py), with a stand-in consumer:
a reader behind the topic's end that does not move is replaced by one at the next offset."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from confluent_kafka import TopicPartition

from api.queues import settings as settings_module
from api.queues.settings import QueueSettingsStore
from kafka_watch import consumer as kafka_consumer


class _Reader:
    """Records up to offset 9 in the settings topic, the reader's own position unknown."""

    made: ClassVar[list[_Reader]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.assigned: list[TopicPartition] = []
        _Reader.made.append(self)

    def assign(self, parts: list[TopicPartition]) -> None:
        self.assigned = parts

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition) for p in self.assigned]

    def offsets_for_times(self, parts: list[TopicPartition], timeout: float) -> list[Any]:
        return [TopicPartition(p.topic, p.partition, 9) for p in parts]

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, -1001) for p in parts]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_reader_that_does_not_move_is_judged_stalled_and_the_next_starts_where_it_stood(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    _Reader.made = []
    monkeypatch.setattr(settings_module, "Consumer", _Reader)
    monkeypatch.setattr(settings_module, "time", clock)
    monkeypatch.setattr(kafka_consumer, "time", clock)
    store = QueueSettingsStore("127.0.0.1:9", "iot.queue-settings", stall_s=30.0)
    first: Any = store._new_consumer()
    assert [(p.partition, p.offset) for p in first.assigned] == [(0, -2)]  # the beginning
    store._next = 4  # applied up to offset 3
    stalled = [store._stalled(first) for _ in range(2)]
    clock.now += 30
    stalled.append(store._stalled(first))
    assert stalled == [False, False, True]
    assert store.stall.renewals == 1
    second: Any = store._new_consumer()
    assert [(p.partition, p.offset) for p in second.assigned] == [(0, 4)]  # nothing again
    assert not store._stalled(second)  # judged afresh
