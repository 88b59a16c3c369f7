"""bench.procstat: CPU meters of processes and of the whole machine, and disk writes."""

from __future__ import annotations

import os

from bench.procstat import CpuMeter, MachineCpuMeter, machine_busy_seconds, write_bytes


def test_the_machine_meter_gives_the_busy_seconds_between_its_marks() -> None:
    readings = iter([100.0, 112.5])
    meter = MachineCpuMeter(lambda: next(readings))
    meter.start()
    assert meter.used() == 12.5


def test_the_machine_meter_says_unknown_when_proc_stat_is_unreadable() -> None:
    meter = MachineCpuMeter(lambda: None)
    meter.start()
    assert meter.used() is None
    assert MachineCpuMeter(lambda: 5.0).used() is None  # never started


def test_real_meters_count_this_process_spinning() -> None:
    mine, machine = CpuMeter([os.getpid()]), MachineCpuMeter()
    mine.start()
    machine.start()
    before = machine_busy_seconds()
    assert before is not None
    assert before > 0
    x = 0
    while (mine.used() or 0.0) < 0.2:
        x += 1
    spent = machine.used()
    assert spent is not None
    assert spent >= 0.15  # this process alone kept one core busy


def test_write_bytes_reads_this_process_and_not_a_missing_one() -> None:
    assert isinstance(write_bytes(os.getpid()), int)
    assert write_bytes(2**22 + 12345) is None
