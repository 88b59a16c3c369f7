"""The queues' AMQP addresses, settle modes and the marker each outcome writes (pure)."""

from __future__ import annotations

from amqp.model import Cond, Refusal
from amqp.queue_model import (
    Outcome,
    QueueAddress,
    amqp_delivery_count,
    answer_for,
    check_queue_settle_modes,
    parse_queue_address,
)
from api.queues import model as qm


def test_queue_addresses() -> None:
    assert parse_queue_address("queue/orders.eu") == QueueAddress("orders.eu")
    for other in (None, "", "telemetry/acme", "queues/x", "topic/x"):
        assert parse_queue_address(other) is None
    for bad in ("queue/", "queue/a b", "queue/a/b", "queue/..", "queue/" + "x" * 246):
        found = parse_queue_address(bad)
        assert isinstance(found, Refusal), bad
        assert found.condition is Cond.NOT_FOUND


def test_only_unsettled_first() -> None:
    assert check_queue_settle_modes(0, 0) is None  # unsettled
    assert check_queue_settle_modes(2, 0) is None  # mixed: the client settles by outcome
    settled = check_queue_settle_modes(1, 0)
    assert settled is not None
    assert settled.condition is Cond.PRECONDITION
    second = check_queue_settle_modes(0, 1)
    assert second is not None
    assert second.condition is Cond.NOT_IMPLEMENTED


def test_each_outcome_writes_its_marker() -> None:
    handle = qm.Handle("orders", 0, 7, "tok", 10_000, 2)
    found = {
        outcome: qm.decode_marker(answer_for(outcome, handle, 5_000, 30_000)) for outcome in Outcome
    }
    assert found == {
        Outcome.ACCEPTED: qm.Marker(qm.ACK, "tok"),
        Outcome.RELEASED: qm.Marker(qm.NACK, "tok"),  # due at once
        Outcome.MODIFIED: qm.Marker(qm.NACK, "tok", deadline_ms=35_000),  # after the timeout
        Outcome.REJECTED: qm.Marker(qm.REJECT, "tok"),
    }


def test_the_amqp_header_counts_earlier_attempts() -> None:
    assert amqp_delivery_count(1) == (0, True)
    assert amqp_delivery_count(3) == (2, False)
