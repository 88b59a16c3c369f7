"""Queues, the pure part: handles, markers and one marker partition's table."""

from __future__ import annotations

from api.queues import model as qm


def _handle(token: str = "t1", deadline: int = 10_000, count: int = 1) -> qm.Handle:
    return qm.Handle("orders", 2, 41, token, deadline, count)


def test_handles_round_trip_and_reject_garbage() -> None:
    handle = _handle()
    assert qm.decode_handle(handle.encode()) == handle
    for bad in ("", "!!!", "bm90IGpzb24", qm.Handle("q", 0, 0, "t", 0, 0).encode()[:-3]):
        assert qm.decode_handle(bad) is None


def test_markers_round_trip_with_the_message() -> None:
    raw = qm.start_marker(_handle(), 3, b"key", b"line one\nline two")
    start = qm.decode_marker(raw)
    assert start is not None
    assert (start.kind, start.token, start.queue, start.partition, start.offset) == (
        qm.START, "t1", "orders", 2, 41,
    )  # fmt: skip
    assert (start.deadline_ms, start.count, start.max_deliveries) == (10_000, 1, 3)
    assert (start.key, start.value) == (b"key", b"line one\nline two")
    ack = qm.decode_marker(qm.answer_marker(qm.ACK, _handle()))
    assert ack == qm.Marker(qm.ACK, "t1")
    tick = qm.decode_marker(qm.tick_marker("gen", 5))
    assert tick == qm.Marker(qm.TICK, owner="gen", now_ms=5)
    assert qm.decode_marker(b"not a marker") is None
    assert qm.decode_marker(b'{"k": "start"}') is None


def _table_with(*handles: qm.Handle, max_deliveries: int = 3) -> qm.MarkerTable:
    table = qm.MarkerTable()
    for offset, h in enumerate(handles):
        table.apply(offset, qm.decode_marker(qm.start_marker(h, max_deliveries, None, b"v")))  # type: ignore[arg-type]
    return table


def test_due_after_deadline_and_grace_unless_acked() -> None:
    table = _table_with(_handle("a", 1000), _handle("b", 2000), _handle("c", 3000))
    table.apply(3, qm.Marker(qm.ACK, "b"))
    assert not table.anything_due(1100, 200)
    assert [r.token for r in table.due(1100, 200)] == []
    assert [r.token for r in table.due(1200, 200)] == ["a"]
    assert [r.token for r in table.due(9999, 200)] == ["a", "c"]  # b was acked
    assert table.low_water() == 0
    table.settle("a")
    assert table.low_water() == 2  # c's start is the oldest still in flight
    table.settle("c")
    assert table.low_water() == table.next_offset == 4


def test_nack_is_due_at_once_and_the_maximum_goes_to_the_dead_letters() -> None:
    table = _table_with(_handle("a", 50_000, count=2), _handle("b", 50_000, count=3))
    table.apply(2, qm.Marker(qm.NACK, "a"))
    table.apply(3, qm.Marker(qm.NACK, "b"))
    table.apply(4, qm.Marker(qm.NACK, "unknown"))  # an answer for a settled token: nothing
    due = table.due(1000, 200)
    assert [(r.token, r.count, r.dead, r.topic) for r in due] == [
        ("a", 2, False, "orders"),
        ("b", 3, True, "orders.dlq"),
    ]
    table.apply(5, qm.Marker(qm.DONE, "a"))
    assert [r.token for r in table.due(1000, 200)] == ["b"]


def test_reject_goes_to_the_dead_letters_at_once_and_a_nack_may_name_its_time() -> None:
    """AMQP's rejected (``reject``) and modified (a ``nack`` due later), amqp.queue_links."""
    table = _table_with(_handle("a", 50_000, count=1), _handle("b", 50_000, count=1))
    reject = qm.decode_marker(qm.answer_marker(qm.REJECT, _handle("a")))
    later = qm.decode_marker(qm.answer_marker(qm.NACK, _handle("b"), 7_000))
    assert reject == qm.Marker(qm.REJECT, "a")
    assert later == qm.Marker(qm.NACK, "b", deadline_ms=7_000)
    table.apply(2, reject)
    table.apply(3, later)
    table.apply(4, qm.Marker(qm.REJECT, "unknown"))  # settled already: nothing
    assert [(r.token, r.dead, r.topic) for r in table.due(1000, 200)] == [
        ("a", True, "orders.dlq"),  # one delivery of 3 allowed, yet dead-lettered
    ]
    assert [r.token for r in table.due(7_200, 200)] == ["a", "b"]
    assert not table.due(7_200, 200)[1].dead


def test_renew_moves_a_deadline_unless_answered() -> None:
    table = _table_with(_handle("a", 1000), _handle("b", 1000))
    renew = qm.decode_marker(qm.answer_marker(qm.RENEW, _handle("a"), 9_000))
    assert renew == qm.Marker(qm.RENEW, "a", deadline_ms=9_000)
    table.apply(2, renew)
    table.apply(3, qm.Marker(qm.NACK, "b"))
    table.apply(4, qm.Marker(qm.RENEW, "b", deadline_ms=9_000))  # after its nack: no effect
    assert [r.token for r in table.due(5_000, 200)] == ["b"]
    assert [r.token for r in table.due(9_200, 200)] == ["a", "b"]


def test_request_parameters() -> None:
    assert qm.visibility_ms(None, 30.0, 60.0) == 30_000
    assert qm.visibility_ms("1.5", 30.0, 60.0) == 1500
    assert qm.visibility_ms("0", 30.0, 60.0) is None
    assert qm.visibility_ms("61", 30.0, 60.0) is None
    assert qm.visibility_ms("x", 30.0, 60.0) is None
    assert qm.handles_of(b'{"receiptHandles": ["a", "b"]}') == ["a", "b"]
    assert qm.handles_of(b'{"receiptHandles": [1]}') is None
    assert qm.handles_of(b"[]") is None
    assert qm.delivery_count([("iot-delivery-count", b"2")]) == 2
    assert qm.delivery_count(None) == 0
