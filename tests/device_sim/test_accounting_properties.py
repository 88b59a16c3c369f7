"""Property test: plant random losses, duplicates and swaps; the accounting finds exactly them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from device_sim.accounting import DeviceExpectation, Expectations, TelemetryRecord, account


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, int], set[tuple[str, int]], list[tuple[str, int]]]:
    n_devices = draw(st.integers(1, 5))
    sent = {f"d{i}": draw(st.integers(1, 30)) for i in range(n_devices)}
    all_msgs = [(d, s) for d, n in sent.items() for s in range(1, n + 1)]
    lost = set(draw(st.lists(st.sampled_from(all_msgs), max_size=10)))
    kept = [m for m in all_msgs if m not in lost]
    dups = draw(st.lists(st.sampled_from(kept), max_size=10)) if kept else []
    return sent, lost, dups


@settings(max_examples=200, deadline=None)
@given(fleets())
def test_planted_losses_and_duplicates_are_found(
    fleet: tuple[dict[str, int], set[tuple[str, int]], list[tuple[str, int]]],
) -> None:
    sent, lost, dups = fleet
    records: list[TelemetryRecord] = []
    offsets: dict[str, int] = {}
    # each device on its own partition, in seq order, then the redelivered duplicates at the end
    for i, (device, n) in enumerate(sent.items()):
        for seq in range(1, n + 1):
            if (device, seq) not in lost:
                off = offsets.setdefault(device, 0)
                records.append(TelemetryRecord(device, seq, i, off, 0))
                offsets[device] = off + 1
    partition = {d: i for i, d in enumerate(sent)}
    for device, seq in dups:
        off = offsets[device]
        records.append(TelemetryRecord(device, seq, partition[device], off, 0))
        offsets[device] = off + 1
    exp = Expectations({d: DeviceExpectation(n) for d, n in sent.items()})
    report = account(exp, records)
    assert report.missing == len(lost)
    assert report.missing_acked == len(lost)
    assert report.duplicates == len(dups)
    assert report.unique == sum(sent.values()) - len(lost)
    assert report.received == len(records)
    assert report.order_violations == 0
    assert report.ok == (not lost)
