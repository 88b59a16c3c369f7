"""Counters: worker stats merged for the progress view."""

from __future__ import annotations

from device_sim.counters import merge_snapshots


def test_merge_snapshots() -> None:
    merged = merge_snapshots(
        [
            {"published": 3, "first_publish": 10.0, "last_publish": 20.0},
            {"published": 4, "first_publish": 5.0, "last_publish": 15.0},
            {"published": 1, "first_publish": None, "last_publish": None},
        ]
    )
    assert merged == {"published": 8, "first_publish": 5.0, "last_publish": 20.0}
