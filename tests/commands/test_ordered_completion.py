"""Unit tests: tokens released in the order they were added, whatever order they complete in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.ordered_completion import OrderedCompletion


@given(st.permutations(list(range(20))))
def test_ordered_completion_releases_in_order(order: list[int]) -> None:
    oc: OrderedCompletion[int] = OrderedCompletion()
    for i in range(20):
        oc.add(i)
    released: list[int] = []
    for i in order:
        released += oc.complete(i)
        assert released == list(range(len(released)))
    assert released == list(range(20))
    assert len(oc) == 0


def test_ordered_completion_rejects_duplicates_and_ignores_unknown() -> None:
    oc: OrderedCompletion[str] = OrderedCompletion()
    oc.add("a")
    with pytest.raises(ValueError, match="already pending"):
        oc.add("a")
    assert oc.complete("zzz") == []
