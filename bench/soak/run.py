"""One soak run: its own Mosquitto + Kafka, a saturation probe of our bridge (unless --rate),
then a fresh bridge at the steady rate for the whole duration, sampled, then read back."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.fleet.sampler import rss_mb
from bench.load import LoadGenerator, LoadSpec
from bench.machine import machine_info
from bench.process_sinks import OurBridgeSink
from bench.procstat import cpu_seconds
from bench.progress import say
from bench.results import OURS
from bench.soak import analysis
from bench.soak.options import SoakOptions
from bench.soak.readback import read_back
from bench.suite_options import SuiteOptions, SuiteRun
from bench.suite_runner import Runner
from stack.config import StackConfig
from stack.launcher import Stack

_ACK_LAG = "iot_bridge_ack_lag_seconds"
_WINDOW = 20_000  # the load's end-to-end window (published - in Kafka), as `make bench`
_STALL_S = 30.0  # drain: give up when Kafka's count has not moved for this long


def ack_lag_buckets(url: str) -> tuple[list[float], list[float]] | None:
    """The bridge's cumulative ack-lag buckets (bounds with +Inf last, counts)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
            text = resp.read().decode()
    except OSError:
        return None
    bounds: list[float] = []
    counts: list[float] = []
    for fam in text_string_to_metric_families(text):
        if fam.name != _ACK_LAG:
            continue
        for s in fam.samples:
            if s.name == f"{_ACK_LAG}_bucket":
                bounds.append(float(s.labels["le"]))
                counts.append(s.value)
    return (bounds, counts) if bounds else None


def probe_maximum(stack: Stack, opts: SoakOptions, data_dir: Path) -> dict[str, Any]:
    """Our bridge's saturated rate on this stack: one ``make bench`` throughput run."""
    suite = SuiteOptions(
        duration_s=opts.probe_s,
        devices=opts.devices,
        payloads=(opts.payload_bytes,),
        publisher_processes=opts.publisher_processes,
        window=_WINDOW,
        partitions=opts.partitions,
        data_dir=data_dir,
    )
    result = Runner(stack, suite, SuiteRun(options=suite, machine={})).mqtt_run(
        OURS, "throughput", opts.payload_bytes
    )
    if result.error or not result.msgs_per_s:
        raise RuntimeError(f"saturation probe failed: {result.error or 'no rate'}")
    return {
        "seconds": opts.probe_s,
        "msgs_per_s": round(result.msgs_per_s, 1),
        "lost": result.lost,
        "notes": result.notes,
    }


class _Sampler:
    """Every ``interval`` s: Kafka's count, the bridge's RSS/CPU and ack-lag buckets."""

    def __init__(self, sink: OurBridgeSink, load: LoadGenerator, interval: float) -> None:
        self.sink, self.load, self.interval = sink, load, interval
        self.samples: list[dict[str, Any]] = []
        self.bounds: list[float] = []
        self._pid = sink.pids()[0]
        self._cpu = cpu_seconds(self._pid) or 0.0
        self.t0 = self._last = time.monotonic()

    def start(self) -> None:
        self.t0 = self._last = time.monotonic()
        self.sample()

    def sample(self) -> None:
        now = time.monotonic()
        cpu = cpu_seconds(self._pid)
        row: dict[str, Any] = {
            "t_s": round(now - self.t0, 2),
            "delivered": self.sink.delivered(),
            "published": self.load.total_published(),
            "bridge_rss_mb": rss_mb(self._pid),
            "bridge_cpu": (
                round((cpu - self._cpu) / (now - self._last), 3)
                if cpu is not None and now > self._last
                else None
            ),
        }
        if cpu is not None:
            self._cpu = cpu
        self._last = now
        lag = ack_lag_buckets(self.sink.metrics_url())
        if lag is not None:
            self.bounds, row["ack_lag"] = lag
        self.samples.append(row)


def _steady(stack: Stack, opts: SoakOptions, rate: float, log_dir: Path) -> dict[str, Any]:
    topic = f"bench.soak.{int(time.time())}"
    sink = OurBridgeSink(
        name=OURS, mqtt_host=stack.mqtt_host, mqtt_port=stack.mqtt_port,
        bootstrap=stack.kafka_bootstrap, topic=topic, partitions=opts.partitions,
        log_dir=log_dir,
    )  # fmt: skip
    sink.start()
    load = LoadGenerator(
        LoadSpec(
            host=stack.mqtt_host,
            port=stack.mqtt_port,
            devices=opts.devices,
            payload_bytes=opts.payload_bytes,
            qos=1,
            duration_s=opts.duration_s,
            rate=rate,
            window=_WINDOW,
            processes=opts.publisher_processes,
        )
    )
    try:
        load.start()
        sampler = _Sampler(sink, load, opts.sample_s)
        say(f"soak: {rate:,.0f} msgs/s for {opts.duration_s:.0f} s on {topic}")
        load.go()
        sampler.start()
        next_sample = sampler.t0 + opts.sample_s
        next_say = sampler.t0 + 60
        while time.monotonic() - sampler.t0 < opts.duration_s + 0.3:
            load.set_delivered(sink.delivered())  # the end-to-end window, as in `make bench`
            now = time.monotonic()
            if now >= next_sample:
                sampler.sample()
                next_sample += opts.sample_s
            if now >= next_say:
                s = sampler.samples[-1]
                rss = s["bridge_rss_mb"] or 0.0
                say(f"  t={s['t_s']:.0f}s in Kafka {s['delivered']:,}, bridge RSS {rss:.1f} MiB")
                next_say += 60
            time.sleep(0.05)
        sampler.sample()  # the end of the steady load
        report = load.finish()
        last, moved = -1, time.monotonic()
        while True:  # drain: every published message into Kafka, or a stall
            d = sink.delivered()
            if d >= report.published:
                break
            if d != last:
                last, moved = d, time.monotonic()
            elif time.monotonic() - moved > _STALL_S:
                break
            time.sleep(0.1)
        drained = sink.delivered()
        rss_end = rss_mb(sink.pids()[0])
    finally:
        load.kill()
        notes = sink.stop()
    say(f"soak: published {report.published:,}, in Kafka {drained:,}; reading it back ...")
    back = read_back(stack.kafka_bootstrap, topic, report.per_device)
    return {
        "topic": topic,
        "published": report.published,
        "acked_by_mosquitto": report.acked,
        "in_kafka": drained,
        "bridge_rss_end_mb": rss_end,
        "bridge_notes": notes,
        "samples": sampler.samples,
        "bounds": sampler.bounds,
        "readback": dataclasses.asdict(back),
    }


def run(opts: SoakOptions) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    doc: dict[str, Any] = {
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()},
        "machine": machine_info(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    # anonymous, explicitly: like `make bench`, this measures the data path, not the log-in
    config = StackConfig.servers_on_free_ports(
        data_dir / "stack", opts.partitions, insecure_anonymous=True
    )
    stack = Stack(config)
    say(f"starting Mosquitto + Kafka under {data_dir} ...")
    stack.up()
    try:
        rate = opts.rate
        if rate is None:
            say(f"saturation probe: {opts.probe_s:.0f} s ...")
            doc["probe"] = probe_maximum(stack, opts, data_dir)
            rate = opts.fraction * doc["probe"]["msgs_per_s"]
            say(f"maximum {doc['probe']['msgs_per_s']:,.0f} msgs/s; soak at {rate:,.0f}")
        doc["rate"] = round(rate, 1)
        doc.update(_steady(stack, opts, rate, data_dir / "logs"))
    finally:
        stack.down()
    doc["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return summarize(doc, opts)


def summarize(doc: dict[str, Any], opts: SoakOptions) -> dict[str, Any]:
    """Figures, timeline and verdict from the raw run (also used to re-render a JSON)."""
    samples, bounds = doc["samples"], doc["bounds"]
    window = opts.compare_window_s
    fig = analysis.figures(samples, bounds, opts.duration_s, window)
    steady = analysis.window_rate(samples, 0.0, opts.duration_s)
    tally = doc["readback"]["tally"]
    lost = tally["lost"] if doc["readback"]["complete"] else None
    v = analysis.verdict(fig, lost, doc["rate"], steady)
    doc["window_s"] = window
    doc["steady_msgs_per_s"] = steady
    doc["figures"] = dataclasses.asdict(fig)
    doc["timeline"] = analysis.timeline(samples, bounds)
    doc["verdict"] = dataclasses.asdict(v)
    return doc
