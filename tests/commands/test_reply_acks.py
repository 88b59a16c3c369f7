"""Unit tests: replies are PUBACKed in arrival order once all their Kafka writes are done."""

from __future__ import annotations

from commands.reply_acks import ReplyAcks


def test_pubacks_wait_for_every_write_and_leave_in_arrival_order() -> None:
    acks = ReplyAcks()
    acks.new_connection(1)
    acks.add(5, writes=2)
    acks.add(6)
    assert acks.done(1, 6) == []  # 5 came first and waits
    assert acks.done(1, 5) == []  # one of its two writes
    assert acks.done(1, 5) == [5, 6]


def test_writes_of_an_earlier_connection_ack_nothing() -> None:
    acks = ReplyAcks()
    acks.new_connection(1)
    acks.add(5)
    acks.new_connection(2)
    assert acks.done(1, 5) == []
    acks.add(5)
    assert acks.done(2, 5) == [5]


def test_a_packet_id_reused_while_pending_starts_afresh() -> None:
    acks = ReplyAcks()
    acks.add(9)
    acks.add(10)
    acks.add(9)  # wrapped around: the old 9 and 10 are forgotten
    assert acks.done(0, 10) == []
    assert acks.done(0, 9) == [9]
