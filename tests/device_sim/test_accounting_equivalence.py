"""The bounded-memory accounting gives the old in-memory accounting's verdict on the same records.

The old implementation lives on as tests/device_sim/reference_accounting.py. Every field of the
report is compared: counts exactly, latency percentiles exactly below 8,192 ms and within the
histogram's stated bound above it.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from device_sim.accounting import (
    Accountant,
    DeviceExpectation,
    DlqRecord,
    Expectations,
    Report,
    TelemetryRecord,
    account,
)
from device_sim.latency_histogram import EXACT_BELOW, RELATIVE_ERROR
from tests.device_sim import reference_accounting

LATENCY_FIELDS = ("p50_ms", "p95_ms", "p99_ms")


def assert_same_verdict(new: Report, old: Report) -> None:
    got, want = new.to_dict(), old.to_dict()
    for name in ("latency", "bridge_latency"):
        g, w = got.pop(name), want.pop(name)
        assert g["count"] == w["count"], name
        assert g["max_ms"] == w["max_ms"], name
        for field in LATENCY_FIELDS:
            if w[field] is None or abs(w[field]) < EXACT_BELOW:
                assert g[field] == w[field], (name, field)
            else:
                assert abs(g[field] - w[field]) <= abs(w[field]) * RELATIVE_ERROR, (name, field)
                assert abs(g[field]) <= abs(w[field])  # rounded toward zero
    assert got == want


@st.composite
def runs(draw: st.DrawFn) -> tuple[Expectations, list[TelemetryRecord], list[DlqRecord]]:
    """A manifest and what Kafka might hold: losses, redeliveries, reorders, strays, other
    partitions, skew, skipped latencies, unacknowledged seqs, QoS 0, wild timestamps."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    n_devices = draw(st.integers(1, 6))
    devices: dict[str, DeviceExpectation] = {}
    for i in range(n_devices):
        sent = draw(st.integers(0, 40))
        devices[f"d{i}"] = DeviceExpectation(
            sent=sent,
            qos=draw(st.sampled_from([0, 1, 1])),
            unacked=frozenset(rnd.sample(range(1, sent + 3), k=min(sent, rnd.randint(0, 3)))),
            skew_ms=rnd.choice([0, 0, 5000, -120]),
            skip_latency=frozenset(rnd.sample(range(1, sent + 1), k=min(sent, rnd.randint(0, 2)))),
        )
    spread = draw(st.sampled_from([50, 3000, 20_000, 2_000_000]))
    records: list[TelemetryRecord] = []
    offsets: dict[int, int] = {}
    names = [*devices, "ghost"] if draw(st.booleans()) else list(devices)
    for device in names:
        exp = devices.get(device, DeviceExpectation(sent=3))
        seqs = [s for s in range(1, exp.sent + 1) if rnd.random() > 0.15]
        seqs += [rnd.choice(seqs) for _ in range(rnd.randint(0, 3)) if seqs]  # redeliveries
        seqs += [rnd.choice([0, -1, exp.sent + 1, exp.sent + 50]) for _ in range(rnd.randint(0, 1))]
        for _ in range(rnd.randint(0, 3)):  # local reorders
            if len(seqs) > 1:
                i = rnd.randrange(len(seqs) - 1)
                seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
        home = rnd.randrange(4)
        for seq in seqs:
            partition = home if rnd.random() > 0.05 else rnd.randrange(4)  # rare split
            offset = offsets.get(partition, 0)
            offsets[partition] = offset + 1
            ts = None if rnd.random() < 0.05 else 1_000_000 + seq * 100
            lat = rnd.randint(-spread // 10, spread)
            received = None if rnd.random() < 0.1 else (ts or 0) + lat // 2
            records.append(
                TelemetryRecord(device, seq, partition, offset, 1_000_000 + lat, ts, received)
            )
    rnd.shuffle(records)  # account() must put them back in log order
    codes = ["not_json", "oversized", "bad_topic"]
    dlq = [DlqRecord(None, rnd.choice(codes), 0, i) for i in range(rnd.randint(0, 5))]
    expected = Expectations(
        devices,
        dlq={c: rnd.randint(0, 2) for c in codes[:2]},
        started_at_ms=0,
        ended_at_ms=rnd.choice([0, 1000, 60_000]),
    )
    return expected, records, dlq


@settings(max_examples=400, deadline=None)
@given(runs(), st.integers(1, 60))
def test_account_equals_the_reference(
    run: tuple[Expectations, list[TelemetryRecord], list[DlqRecord]], max_problems: int
) -> None:
    expected, records, dlq = run
    new = account(expected, records, dlq, max_problem_devices=max_problems)
    old = reference_accounting.account(expected, records, dlq, max_problem_devices=max_problems)
    assert_same_verdict(new, old)


def _interleaved(records: list[TelemetryRecord], rnd: random.Random) -> list[Any]:
    """Rows as a consumer hands them over: each partition in offset order, partitions mixed."""
    queues: dict[int, list[TelemetryRecord]] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        queues.setdefault(rec.partition, []).append(rec)
    out = []
    while queues:
        p = rnd.choice(sorted(queues))
        k = rnd.randint(1, 5)
        take, queues[p] = queues[p][:k], queues[p][k:]
        out += take
        queues = {k: v for k, v in queues.items() if v}
    return [(r.device, r.seq, r.partition, r.kafka_ts, r.ts, r.received_at) for r in out]


@settings(max_examples=300, deadline=None)
@given(runs(), st.integers(0, 2**32))
def test_streaming_in_read_order_equals_the_reference(
    run: tuple[Expectations, list[TelemetryRecord], list[DlqRecord]], seed: int
) -> None:
    """Fed as Kafka hands records over (partitions interleaved, in batches), the accountant
    gives the reference's verdict whenever each device stays in one partition; when a device
    spans partitions, every count but the order violations is still the same."""
    expected, records, dlq = run
    rnd = random.Random(seed)
    rows = _interleaved(records, rnd)
    accountant = Accountant(expected)
    while rows:
        k = rnd.randint(1, 50)
        batch, rows = rows[:k], rows[k:]
        accountant.add_telemetry(batch)
        accountant.report()  # a running report changes nothing
    accountant.add_dlq(d.error for d in dlq)
    new = accountant.report()
    old = reference_accounting.account(expected, records, dlq)
    if not old.devices_spanning_partitions:
        assert_same_verdict(new, old)
    else:
        for name in ("received", "unique", "missing", "missing_acked", "duplicates", "unexpected"):
            assert getattr(new, name) == getattr(old, name), name
        assert new.devices_spanning_partitions == old.devices_spanning_partitions
        assert new.partitions_per_device == old.partitions_per_device
        assert new.failures == old.failures


@settings(max_examples=300, deadline=None)
@given(runs(), st.integers(0, 2**32), st.integers(2, 4))
def test_partitions_counted_apart_and_merged_equal_the_reference(
    run: tuple[Expectations, list[TelemetryRecord], list[DlqRecord]], seed: int, workers: int
) -> None:
    """The parallel verifier: each worker counts its share of the partitions (in read order)
    with an accountant of its own; merged, they give the reference's verdict, with the same
    caveat as above for a device spanning partitions."""
    expected, records, dlq = run
    rnd = random.Random(seed)
    shares = [Accountant(expected) for _ in range(workers)]
    for row in _interleaved(records, rnd):
        shares[row[2] % workers].add_telemetry([row])
    merged = shares[0]
    merged.add_dlq(d.error for d in dlq)
    for other in shares[1:]:
        merged.merge(other)
    new = merged.report()
    old = reference_accounting.account(expected, records, dlq)
    if not old.devices_spanning_partitions:
        assert_same_verdict(new, old)
    else:
        for name in ("received", "unique", "missing", "missing_acked", "duplicates", "unexpected"):
            assert getattr(new, name) == getattr(old, name), name
        assert new.devices_spanning_partitions == old.devices_spanning_partitions
        assert new.partitions_per_device == old.partitions_per_device
        assert new.failures == old.failures
