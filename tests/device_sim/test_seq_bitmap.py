"""One bit per seq: seen, redelivered, and the missing seqs and their runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from device_sim import seq_bitmap
from device_sim.accounting import ranges


def test_test_and_set() -> None:
    bm = seq_bitmap.new_bitmap(10)
    assert not seq_bitmap.test_and_set(bm, 10)
    assert seq_bitmap.test_and_set(bm, 10)
    assert seq_bitmap.is_set(bm, 10)
    assert not seq_bitmap.is_set(bm, 9)
    assert len(bm) == 2


@settings(max_examples=300)
@given(st.integers(0, 200), st.data())
def test_unset_and_its_runs(n: int, data: st.DataObject) -> None:
    seen = data.draw(st.sets(st.integers(1, max(1, n)), max_size=n))
    seen = {s for s in seen if s <= n}
    bm = seq_bitmap.new_bitmap(n)
    for s in seen:
        seq_bitmap.test_and_set(bm, s)
    missing = [s for s in range(1, n + 1) if s not in seen]
    assert list(seq_bitmap.unset(bm, n)) == missing
    assert seq_bitmap.unset_runs(bm, n) == len(ranges(missing))
