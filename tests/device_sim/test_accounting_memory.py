"""A 20-million-record stream verified in bounded memory (issue 19): no Kafka, generated rows.

2,000 devices x 10,000 seqs each, on 12 partitions, fed in batches of 20,000 rows as a consumer
would hand them over, with planted losses, redeliveries and reorders whose counts are known, and
a latency pattern whose exact percentiles are known. The stream runs in a child process so
that its peak RSS (VmHWM) is its own; it must stay far below what the old accounting
needed: 20 million ``TelemetryRecord`` objects in lists, at about 100 bytes each plus their ints
and the list slots, are over 2 GB. (tracemalloc would be finer but makes this run 20x slower.)
Measured: about 30 s and a 33 MB peak RSS, the interpreter included, on the shared 2 cores.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from device_sim.accounting import (
    Accountant,
    DeviceExpectation,
    DeviceProblems,
    Expectations,
    Latency,
    Report,
    Row,
)

DEVICES = 2_000
SEQS = 10_000
PARTITIONS = 12
T0 = 1_800_000_000_000
PEAK_RSS_LIMIT_KB = 150 * 1024  # interpreter ~20 MB; bitmaps 2.5 MB; a batch of rows ~3 MB
ROOT = Path(__file__).resolve().parents[2]

LOST_SEQ = 5_000  # lost by every 100th device (never acknowledged by nobody: all QoS 1)
DUP_SEQ = 10  # redelivered after seq 11 by every 50th device
SWAP = (100, 101)  # sent 101 before 100 by every 25th device


def latency_ms(seq: int) -> int:
    return seq % 1_000


def rows() -> Iterator[list[Row]]:
    names = [f"dev-{i:05d}" for i in range(DEVICES)]
    parts = [i % PARTITIONS for i in range(DEVICES)]
    everyone = range(DEVICES)
    halves = (everyone[: DEVICES // 2], everyone[DEVICES // 2 :])
    plain = [[(names[i], parts[i]) for i in half] for half in halves]
    lossy = set(range(0, DEVICES, 100))
    special = {*SWAP, LOST_SEQ, DUP_SEQ + 1}  # the seqs where some device deviates
    for seq in range(1, SEQS + 1):
        if seq not in special:
            # every device sends seq in order: one comprehension, the same rows as below
            ts = T0 + seq * 1_000
            lat = latency_ms(seq)
            kafka_ts, received_at = ts + lat, ts + lat // 2
            for pairs in plain:
                yield [(name, seq, part, kafka_ts, ts, received_at) for name, part in pairs]
            continue
        for half in halves:
            batch: list[Row] = []
            for i in half:
                s = seq
                if i % 25 == 0 and seq in SWAP:
                    s = SWAP[1] if seq == SWAP[0] else SWAP[0]
                if s == LOST_SEQ and i in lossy:
                    continue
                ts = T0 + s * 1_000
                lat = latency_ms(s)
                batch.append((names[i], s, parts[i], ts + lat, ts, ts + lat // 2))
                if seq == DUP_SEQ + 1 and i % 50 == 0:
                    dup_ts = T0 + DUP_SEQ * 1_000
                    batch.append((names[i], DUP_SEQ, parts[i], dup_ts + 5_000, dup_ts, None))
            yield batch


def nearest_rank(counts: Counter[int], q: float) -> float:
    total = sum(counts.values())
    rank = max(1, math.ceil(q / 100.0 * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return float(value)
    raise AssertionError("unreachable")


def stream_and_account() -> tuple[Report, float]:
    """Feed the whole stream to an accountant; the report and the seconds it took."""
    expected = Expectations(
        {f"dev-{i:05d}": DeviceExpectation(sent=SEQS) for i in range(DEVICES)},
        started_at_ms=T0,
        ended_at_ms=T0 + SEQS * 1_000,
    )
    started = time.monotonic()
    accountant = Accountant(expected)
    for batch in rows():
        accountant.add_telemetry(batch)
    return accountant.report(), time.monotonic() - started


def peak_rss_kb() -> int:
    """This address space's high-water mark (VmHWM). Not ru_maxrss: Linux carries that across
    execve, so a child of a big pytest process would report its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


CHILD = """
import sys, orjson
from tests.device_sim.test_accounting_memory import peak_rss_kb, stream_and_account
report, elapsed = stream_and_account()
doc = {"report": report.to_dict(), "elapsed_s": elapsed,
       "maxrss_kb": peak_rss_kb()}
sys.stdout.buffer.write(orjson.dumps(doc))
"""


@pytest.mark.slow
def test_twenty_million_records_in_bounded_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, check=True, timeout=600
    )
    doc = orjson.loads(done.stdout)
    report = Report(
        **{
            k: v
            for k, v in doc["report"].items()
            if k not in ("ok", "latency", "bridge_latency", "problems")
        }
    )
    report.latency = Latency(**doc["report"]["latency"])
    report.bridge_latency = Latency(**doc["report"]["bridge_latency"])
    report.problems = [DeviceProblems(**p) for p in doc["report"]["problems"]]

    lost = DEVICES // 100
    dups = DEVICES // 50
    assert report.received == DEVICES * SEQS - lost + dups >= 20_000_000
    assert report.sent == DEVICES * SEQS
    assert report.unique == DEVICES * SEQS - lost
    assert (report.missing, report.missing_acked) == (lost, lost)
    assert report.duplicates == dups
    assert report.order_violations == DEVICES // 25
    assert report.partitions_per_device == {"1": DEVICES}
    assert report.failures == [f"{lost} acknowledged telemetry messages missing"]
    assert [p.missing for p in report.problems[:lost]] == [[str(LOST_SEQ)]] * lost

    # every first delivery has latency seq % 1000 (the redelivered copies do not count)
    counts: Counter[int] = Counter()
    for seq in range(1, SEQS + 1):
        counts[latency_ms(seq)] += DEVICES - (lost if seq == LOST_SEQ else 0)
    assert report.latency.count == DEVICES * SEQS - lost
    for q, got in (
        (50, report.latency.p50_ms),
        (95, report.latency.p95_ms),
        (99, report.latency.p99_ms),
    ):
        assert got == nearest_rank(counts, q)
    assert report.latency.max_ms == 999.0
    assert report.bridge_latency.count == DEVICES * SEQS - lost

    peak_kb = doc["maxrss_kb"]
    assert peak_kb < PEAK_RSS_LIMIT_KB, f"peak RSS {peak_kb / 1024:.0f} MB"
    print(f"\n20M records: {doc['elapsed_s']:.1f} s, peak RSS {peak_kb / 1024:.0f} MB")


def test_the_child_measures_its_own_peak() -> None:
    """VmHWM grows with what a process holds: the bound above can fail."""
    probe = (
        "from tests.device_sim.test_accounting_memory import peak_rss_kb; "
        "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); print(peak_rss_kb())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, check=True, timeout=60
    )
    assert int(done.stdout) > PEAK_RSS_LIMIT_KB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
