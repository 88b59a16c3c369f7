"""Read a soak topic back once the run is over: the seq tally and publish -> Kafka latency, in
memory bounded by the devices (not the records)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench.kafka_side import PROBE_DEVICE, read_whole_topic
from bench.soak.seq_tally import SeqTally, TallyResult, seq_of
from device_sim.latency_histogram import LatencyHistogram

_TS = b'{"ts":'
_PROBE_KEY = PROBE_DEVICE.encode()  # the sink's end-to-end readiness probe, not the load


def ts_of(payload: bytes) -> int | None:
    """The ``ts`` (ms) of the benchmark's payload, which starts ``{"ts":<ms>,``."""
    if not payload.startswith(_TS):
        return None
    end = payload.find(b",", len(_TS), len(_TS) + 21)
    try:
        return int(payload[len(_TS) : end]) if end > 0 else None
    except ValueError:
        return None


def latency_figures(hist: LatencyHistogram) -> tuple[int | None, int | None, int | None]:
    """p50, p99 and the maximum (ms) of ``hist``; None for each when it is empty."""
    if not hist.count:
        return None, None, None
    p50, p99 = hist.percentiles([50, 99])
    return int(p50), int(p99), hist.max


@dataclass(frozen=True)
class Readback:
    tally: TallyResult
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    latency_max_ms: int | None
    unreadable: int
    seconds: float
    complete: bool


def read_back(
    bootstrap: str, topic: str, expected: dict[str, int], timeout_s: float = 3600.0
) -> Readback:
    """Every record of ``topic`` up to its end now, keyed by device (the bridge's key)."""
    started = time.monotonic()
    tally = SeqTally(expected)
    latency = LatencyHistogram()
    unreadable = 0
    consumer, remaining = read_whole_topic(bootstrap, topic)
    try:
        deadline = started + timeout_s
        add = tally.add
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error():
                    continue
                p = msg.partition() or 0
                off = msg.offset() or 0
                if p in remaining and off >= remaining[p] - 1:
                    del remaining[p]
                value = msg.value() or b""
                key = msg.key()
                if key == _PROBE_KEY:
                    continue
                seq = seq_of(value)
                if key is None or seq is None:
                    unreadable += 1
                    continue
                add(key.decode("utf-8", "replace"), seq, p)
                ts = ts_of(value)
                _kind, appended = msg.timestamp()
                if ts is not None and appended:
                    latency.add(max(0, appended - ts))
        p50, p99, worst = latency_figures(latency)
        return Readback(
            tally=tally.result(),
            latency_p50_ms=p50,
            latency_p99_ms=p99,
            latency_max_ms=worst,
            unreadable=unreadable,
            seconds=round(time.monotonic() - started, 1),
            complete=not remaining,
        )
    finally:
        consumer.close()
