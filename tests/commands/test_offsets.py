"""Unit tests: which iot.commands offsets may be stored, and which devices are ours."""

from __future__ import annotations

from bridge.partitioner import partition_for
from commands.model import Source
from commands.offsets import CommandOffsets


def test_the_stored_offset_follows_the_done_prefix_of_a_partition() -> None:
    offsets = CommandOffsets()
    offsets.assign({0, 1})
    for offset in (10, 11, 12):
        offsets.read(0, offset)
    offsets.read(1, 5)
    assert offsets.done(Source(0, 11)) is None  # 10 is not done yet
    assert offsets.done(Source(1, 5)) == 6
    assert offsets.done(Source(0, 10)) == 12  # 10 and 11: the next to read is 12
    assert offsets.done(Source(0, 12)) == 13


def test_an_offset_read_twice_is_counted_once() -> None:
    offsets = CommandOffsets()
    offsets.assign({0})
    offsets.read(0, 3)
    offsets.read(0, 3)
    assert offsets.done(Source(0, 3)) == 4
    assert offsets.done(Source(0, 3)) is None


def test_a_revoked_partition_stores_nothing() -> None:
    offsets = CommandOffsets()
    offsets.assign({0, 1})
    offsets.read(1, 7)
    offsets.revoke({1})
    assert offsets.assigned == {0}
    assert offsets.done(Source(1, 7)) is None


def test_devices_of_our_partitions_are_ours_and_all_are_while_the_count_is_unknown() -> None:
    offsets = CommandOffsets()
    assert offsets.owns_device("dev-1")
    offsets.partition_count = 4
    offsets.assign({partition_for(b"dev-1", 4)})
    assert offsets.owns_device("dev-1")
    other = next(
        d
        for d in (f"dev-{i}" for i in range(100))
        if partition_for(d.encode(), 4) != partition_for(b"dev-1", 4)
    )
    assert not offsets.owns_device(other)
