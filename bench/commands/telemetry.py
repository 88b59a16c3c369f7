"""The telemetry beside the commands: the raw-socket load through the bridge, counted where it
lands (the telemetry topic's Kafka high watermarks), its maximum and its paced rate."""

from __future__ import annotations

import argparse
import threading
import time

from bench.commands.errors import BenchError
from bench.commands.options import MAX_WARMUP_S
from bench.commands.stack_setup import Servers
from bench.kafka_side import Watermarks
from bench.load import LoadGenerator, LoadSpec
from bench.results import steady_rate


class TelemetryMonitor:
    """Samples the telemetry topic's record count (Kafka high watermarks) every ``interval`` s
    in a thread; feeds the followed load generator's window with what was delivered."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.05):
        self._wm = Watermarks(bootstrap, topic, partitions)
        self.interval = interval
        self._lock = threading.Lock()
        self.samples: list[tuple[float, int]] = []  # (time.monotonic(), records)
        # (time.monotonic(), records in Kafka, published by the followed load) for the timeline
        self.published: list[tuple[float, int, int]] = []
        self._load: LoadGenerator | None = None
        self._base = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self.latest(after=time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            count = self._wm.count()
            now = time.monotonic()
            with self._lock:
                self.samples.append((now, count))
                load, base = self._load, self._base
            if load is not None:
                load.set_delivered(count - base)
                with self._lock:
                    self.published.append((now, count - base, load.total_published()))
            self._stop.wait(self.interval)

    def latest(self, after: float | None = None, timeout: float = 30.0) -> tuple[float, int]:
        """The newest sample (taken after monotonic time ``after``, waiting for it if given)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self.samples and (after is None or self.samples[-1][0] > after):
                    return self.samples[-1]
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise BenchError("the telemetry topic's watermarks could not be read")
            time.sleep(self.interval / 2)

    def follow(self, load: LoadGenerator | None) -> int:
        """Feed ``load`` (not yet publishing) from now on; returns the count it starts from."""
        _t, base = self.latest(after=time.monotonic())
        with self._lock:
            self._load, self._base = load, base
        return base

    def published_between(self, start: float, end: float) -> list[tuple[float, int, int]]:
        with self._lock:
            return [row for row in self.published if start <= row[0] <= end]

    def rate(self, start: float, end: float) -> float | None:
        """Records/s written between monotonic times ``start`` and ``end``."""
        with self._lock:
            samples = list(self.samples)
        return steady_rate(samples, start, end)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._wm.close()


def telemetry_load(
    args: argparse.Namespace, servers: Servers, duration_s: float, rate: float | None
) -> LoadGenerator:
    """The telemetry publishers (QoS 1, their own devices), started but not yet publishing;
    ``rate`` None: unpaced, held back only by the window."""
    load = LoadGenerator(
        LoadSpec(
            host=servers.mqtt_host,
            port=servers.mqtt_port,
            devices=args.telemetry_devices,
            payload_bytes=args.telemetry_payload,
            qos=1,
            duration_s=duration_s,
            rate=rate,
            window=args.telemetry_window,
            processes=args.telemetry_processes,
        )
    )
    load.start()
    return load


def measure_max(
    args: argparse.Namespace, servers: Servers, monitor: TelemetryMonitor
) -> tuple[float, list[str]]:
    """The bridge's telemetry maximum: unpaced, window-bounded publishers, Kafka watermarks."""
    notes: list[str] = []
    load = telemetry_load(args, servers, args.max_duration, None)
    try:
        base = monitor.follow(load)
        t0 = time.monotonic()
        load.go()
        report = load.finish(timeout=args.max_duration + 120)
    finally:
        load.kill()
    # drain: the bridge has at most the window left to write
    last, last_change = -1, time.monotonic()
    while True:
        _t, count = monitor.latest(after=time.monotonic())
        done = count - base
        if done >= report.published:
            break
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > 20:
            notes.append(f"maximum run: delivery stopped at {done:,} of {report.published:,}")
            break
    monitor.follow(None)
    rate = monitor.rate(t0 + MAX_WARMUP_S, t0 + args.max_duration)
    if not rate:
        raise BenchError("the bridge delivered no telemetry while measuring its maximum")
    if report.acked < report.published:
        notes.append(f"maximum run: Mosquitto acked {report.acked:,} of {report.published:,}")
    return rate, notes


def start_paced(
    args: argparse.Namespace,
    servers: Servers,
    monitor: TelemetryMonitor,
    rate: float,
    duration_s: float,
) -> LoadGenerator | None:
    """Telemetry at ``rate`` msgs/s from now on for up to ``duration_s`` (None for rate 0)."""
    # the paced phase needs no fine curve: fewer watermark requests on the shared Kafka
    monitor.interval = 0.1
    if rate <= 0:
        return None
    load = telemetry_load(args, servers, duration_s, rate)
    try:
        monitor.follow(load)
        load.go()
    except BaseException:
        load.kill()
        raise
    return load
