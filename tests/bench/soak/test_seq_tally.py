import random

from bench.payload import PayloadMaker
from bench.results import check_sequences
from bench.soak.readback import latency_figures, ts_of
from bench.soak.seq_tally import SeqTally, seq_of
from device_sim.latency_histogram import LatencyHistogram


def test_seq_and_ts_come_from_the_benchmark_payload_without_parsing_it() -> None:
    payload = PayloadMaker("d00042", 1024).make(1_795_000_000_123, 987_654)
    assert seq_of(payload) == 987_654
    assert ts_of(payload) == 1_795_000_000_123
    assert seq_of(b'{"ts":1,"sequence":2}') is None
    assert seq_of(b'{"ts":1,"seq":x,') is None
    assert ts_of(b"not json") is None


def test_the_tally_agrees_with_the_full_check_on_a_messy_stream() -> None:
    rng = random.Random(7)
    expected = {f"d{i:05d}": rng.randint(0, 300) for i in range(40)}
    records: list[tuple[str, int, int]] = []
    for device, n in expected.items():
        part = hash(device) % 4
        seqs = [s for s in range(n) if rng.random() > 0.01]  # some lost
        for s in seqs:
            records.append((device, s, part))
            if rng.random() < 0.02:  # a redelivery replays the last few
                records.extend((device, r, part) for r in range(max(0, s - 3), s + 1))
        if n and rng.random() < 0.1:
            records.append((device, 0, (part + 1) % 4))  # a second partition
    records.append(("unknown", 1, 0))
    records.append(("d00000", 10_000, 0))
    rng.shuffle(records)  # interleave devices (order per device is not kept: reorders too)
    tally = SeqTally(expected)
    for device, seq, part in records:
        tally.add(device, seq, part)
    got = tally.result()
    want = check_sequences(records, expected)
    assert (got.expected, got.received, got.distinct, got.lost) == (
        want.expected, want.received, want.distinct, want.lost,
    )  # fmt: skip
    assert (got.duplicates, got.reordered, got.unexpected, got.devices_multi_partition) == (
        want.duplicates, want.reordered, want.unexpected, want.devices_multi_partition,
    )  # fmt: skip
    assert got.lost > 0
    assert got.duplicates > 0
    assert got.unexpected == 2


def test_latency_percentiles_of_a_per_millisecond_histogram() -> None:
    hist = LatencyHistogram()
    hist.update([3] * 98 + [40, 99])
    p50, p99, worst = latency_figures(hist)
    assert p50 == 3
    assert p99 == 40
    assert worst == 99
    assert hist.percentiles([100]) == [99.0]
    assert latency_figures(LatencyHistogram()) == (None, None, None)
