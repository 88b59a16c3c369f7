"""The contenders, as sinks the same publisher load is pointed at.

Each sink starts its process(es), says when it is ready, reports how many messages it has
delivered so far (for the load's window and the throughput curve) and stops. Here the base,
the in-process ceilings (the counting subscriber, publishers only); the bridges run as
subprocesses are in :mod:`bench.process_sinks`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from typing import Any

from bench.subscriber import count_forever


class SinkError(Exception):
    """A contender did not start, get ready or stop."""


class Sink:
    """Base: a contender behind Mosquitto."""

    name = "sink"
    uses_kafka = True

    def start(self) -> None:
        raise NotImplementedError

    def pids(self) -> list[int]:
        raise NotImplementedError

    def delivered(self) -> int:
        raise NotImplementedError

    def stop(self) -> list[str]:
        """Stop everything; returns notes (e.g. a non-zero exit)."""
        raise NotImplementedError

    def peak_rss_mb(self) -> float | None:
        return None


class CounterSink(Sink):
    """Mosquitto's one-to-one ceiling: a raw MQTT 5 subscriber that only counts."""

    uses_kafka = False

    def __init__(self, name: str, host: str, port: int, *, qos: int, latency: bool) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.qos = qos
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self._counter = ctx.Value("q", 0, lock=False)
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._lat: Any = ctx.Queue() if latency else None
        self._lat_from = ctx.Value("q", 2**62, lock=False)
        self._proc: Any = None
        self.latencies: list[int] = []
        self._rss: float | None = None

    def start(self) -> None:
        self._proc = self._ctx.Process(
            target=count_forever,
            kwargs={
                "host": self.host,
                "port": self.port,
                "topic_filter": "devices/+/telemetry",
                "qos": self.qos,
                "counter": self._counter,
                "ready": self._ready,
                "stop": self._stop,
                "latencies": self._lat,
                "latency_from_ms": self._lat_from,
            },
            daemon=True,
        )
        self._proc.start()
        if not self._ready.wait(30):
            self.stop()
            raise SinkError("counting subscriber did not subscribe in 30 s")

    def set_latency_from(self, ts_ms: int) -> None:
        """Sample latency only for messages published at or after ``ts_ms``."""
        self._lat_from.value = ts_ms

    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None else []

    def delivered(self) -> int:
        return int(self._counter.value)

    def stop(self) -> list[str]:
        if self._proc is None:
            return []
        from bench.procstat import peak_rss_mb

        self._rss = peak_rss_mb(self._proc.pid)
        self._stop.set()
        if self._lat is not None:
            with contextlib.suppress(Exception):
                self.latencies = self._lat.get(timeout=30)
        self._proc.join(timeout=10)
        notes = []
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
            notes.append("counting subscriber did not stop (killed)")
        elif self._proc.exitcode != 0:
            notes.append(f"counting subscriber FAILED (exit {self._proc.exitcode})")
        self._proc = None
        return notes

    def peak_rss_mb(self) -> float | None:
        return self._rss


class ShardedCounterSink(Sink):
    """The ceiling of N Mosquitto shards (`--mqtt-shards N`): a counting subscriber on each
    shard's own port (a subscriber through HAProxy would land on one shard only)."""

    uses_kafka = False

    def __init__(self, name: str, host: str, ports: list[int], *, qos: int, latency: bool) -> None:
        self.name = name
        self.shards = [CounterSink(name, host, port, qos=qos, latency=latency) for port in ports]
        self.latencies: list[int] = []

    def start(self) -> None:
        for shard in self.shards:
            shard.start()

    def set_latency_from(self, ts_ms: int) -> None:
        for shard in self.shards:
            shard.set_latency_from(ts_ms)

    def pids(self) -> list[int]:
        return [pid for shard in self.shards for pid in shard.pids()]

    def delivered(self) -> int:
        return sum(shard.delivered() for shard in self.shards)

    def stop(self) -> list[str]:
        notes = [note for shard in self.shards for note in shard.stop()]
        self.latencies = [v for shard in self.shards for v in shard.latencies]
        return notes

    def peak_rss_mb(self) -> float | None:
        each = [shard.peak_rss_mb() for shard in self.shards]
        return sum(v for v in each if v is not None) if any(v is not None for v in each) else None


class PublisherOnlySink(Sink):
    """No subscriber at all: Mosquitto takes and drops, so the rate is the publishers' own
    ceiling together with Mosquitto's ingest. "Delivered" = acknowledged by Mosquitto (QoS 1
    PUBACKs), so bytes still sitting in socket buffers do not count."""

    name = "publisher-only"
    uses_kafka = False

    def __init__(self) -> None:
        self._load: Any = None

    def attach(self, load: Any) -> None:
        self._load = load

    def start(self) -> None:
        return None

    def pids(self) -> list[int]:
        return []

    def delivered(self) -> int:
        return int(self._load.total_acked()) if self._load is not None else 0

    def stop(self) -> list[str]:
        return []
