"""Benchmark payloads (exact size, valid for the bridge) and ProducerPerformance parsing."""

from __future__ import annotations

import math

import orjson
import pytest

from bench.kafka_side import KafkaSideError, parse_producer_performance
from bench.payload import PayloadError, PayloadMaker, device_id


@pytest.mark.parametrize("size", [200, 1024, 4096])
@pytest.mark.parametrize(("ts", "seq"), [(0, 0), (1_795_266_000_123, 9), (10**13 - 1, 10**9)])
def test_payload_exact_size_and_shape(size: int, ts: int, seq: int) -> None:
    raw = PayloadMaker(device_id(42), size).make(ts, seq)
    assert len(raw) == size
    doc = orjson.loads(raw)
    assert doc["ts"] == ts
    assert doc["seq"] == seq
    assert doc["tags"]["dev"] == "d00042"
    assert all(isinstance(v, float) and math.isfinite(v) for v in doc["metrics"].values())


def test_payload_too_small() -> None:
    with pytest.raises(PayloadError):
        PayloadMaker("d00001", 100)


def test_parse_producer_performance_summary() -> None:
    out = (
        "49996 records sent, 9999.2 records/sec (9.76 MB/sec), 3.1 ms avg latency, 80.0 ms max"
        " latency.\n"
        "100000 records sent, 9995.003498 records/sec (9.76 MB/sec), 2.45 ms avg latency, "
        "120.00 ms max latency, 2 ms 50th, 5 ms 95th, 17 ms 99th, 95 ms 99.9th.\n"
    )
    s = parse_producer_performance(out)
    assert s.records == 100_000
    assert s.rate == pytest.approx(9995.003498)
    assert (s.p50_ms, s.p99_ms) == (2.0, 17.0)
    steady = out + (
        "80000 steady state records sent, 12385.498645 records/sec (12.10 MB/sec), 2101.63 ms "
        "avg latency, 3191.00 ms max latency, 2050 ms 50th, 2959 ms 95th, 3082 ms 99th, "
        "3132 ms 99.9th.\n"
    )
    s = parse_producer_performance(steady)
    assert (s.records, s.p50_ms, s.p99_ms) == (80_000, 2050.0, 3082.0)
    assert s.rate == pytest.approx(12385.498645)
    with pytest.raises(KafkaSideError):
        parse_producer_performance("nothing useful")
