"""Mosquitto's saves from its cumulative disk writes: grouping, the figures, the watch."""

from __future__ import annotations

from bench.commands.broker_saves import Save, SaveWatch, saves_from_samples, summary

MB = 1_000_000


def test_increases_close_together_are_one_save_and_a_gap_starts_the_next() -> None:
    samples = [
        (0.0, 0),
        (0.1, 0),
        (0.2, 100 * MB),
        (0.3, 300 * MB),
        (0.4, 300 * MB),
        (5.0, 300 * MB),
        (5.1, 350 * MB),
    ]
    assert saves_from_samples(samples) == [Save(0.2, 0.3, 300 * MB), Save(5.1, 5.1, 50 * MB)]


def test_bursts_smaller_than_a_save_are_log_lines() -> None:
    samples = [(0.0, 0), (1.0, 4096), (3.0, 8192), (6.0, 8192 + 2 * MB)]
    assert saves_from_samples(samples) == [Save(6.0, 6.0, 2 * MB)]


def test_no_writes_no_saves() -> None:
    assert saves_from_samples([(0.0, 7), (1.0, 7)]) == []
    assert saves_from_samples([]) == []


def test_summary_counts_what_the_saves_wrote_and_held() -> None:
    saves = [Save(1.0, 1.5, 400 * MB), Save(7.0, 8.0, 600 * MB)]
    assert summary(saves, window_s=30.0) == {
        "saves": 2,
        "written_mb": 1000.0,
        "largest_mb": 600.0,
        "longest_s": 1.0,
        "share_of_window": 0.05,
    }
    assert summary([], 30.0)["saves"] == 0


def test_the_watch_samples_until_the_process_cannot_be_read() -> None:
    values = iter([0, 0, 200 * MB, 500 * MB, 500 * MB])
    watch = SaveWatch(lambda: 42, interval=0.001, read=lambda _pid: next(values, None))
    watch.start()
    watch._thread.join(5)  # ends by itself once read() returns None
    saves = watch.stop()
    assert len(watch.samples) == 5
    assert saves is not None
    assert [s.bytes for s in saves] == [500 * MB]


def test_the_watch_without_a_process_sees_nothing() -> None:
    watch = SaveWatch(lambda: None, interval=0.001)
    watch.start()
    assert watch.stop() is None  # not read, which is not "no saves"
    assert watch.samples == []
