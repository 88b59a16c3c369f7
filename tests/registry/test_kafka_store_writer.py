"""Becoming the registry writer while the transaction coordinator moves (no server needed)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from registry import kafka_store
from registry.kafka_store import KafkaStore, StoreError


class _Producer:
    """Refuses init_transactions with the queued errors, one per new producer, then succeeds."""

    refusals: ClassVar[list[int]] = []
    made = 0

    def __init__(self, _config: dict[str, Any]) -> None:
        type(self).made += 1

    def init_transactions(self, _timeout: float) -> None:
        if self.refusals:
            raise KafkaException(KafkaError(self.refusals.pop(0), "refused"))


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[_Producer]:
    monkeypatch.setattr(kafka_store, "Producer", _Producer)
    monkeypatch.setattr(kafka_store.time, "sleep", lambda _s: None)
    _Producer.made = 0
    return _Producer


def test_a_moving_coordinator_is_waited_for(producer: type[_Producer]) -> None:
    # what a 3-node cluster answered right after it started (issue 17's docs example run)
    producer.refusals = [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS]
    store = KafkaStore("k1:9092,k2:9092,k3:9092", timeout=30)
    store.open_writer()
    assert producer.made == 3  # a fresh producer per try
    assert store._producer is not None


def test_other_refusals_fail_at_once(producer: type[_Producer]) -> None:
    producer.refusals = [KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    with pytest.raises(StoreError, match="could not become the registry writer"):
        KafkaStore("k1:9092", timeout=30).open_writer()
    assert producer.made == 1
