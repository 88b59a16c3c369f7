"""The ingest suite: every contender against the same publisher load, in one run.

Order: throughput for each payload size (limit, Kafka's own producer benchmark, our bridge at
QoS 1 and QoS 0, the naive bridge, mq-bridge), then latency at half of our QoS 1 maximum, then
our bridge's scaling (1/2/4 processes on a shared subscription, 1,000 vs 10,000 devices).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.kafka_side import (
    create_topics,
    parse_producer_performance,
    producer_performance_argv,
    verify_topic,
)
from bench.load import LoadGenerator, LoadSpec
from bench.process_sinks import MqBridgeSink, NaiveBridgeSink, OurBridgeSink, ProcessSink
from bench.procstat import CpuMeter
from bench.results import (
    LIMIT,
    OURS,
    RunResult,
    cpu_per_million,
    find,
    percentile,
    steady_rate,
)
from bench.sinks import CounterSink, PublisherOnlySink, Sink
from stack.config import StackConfig
from stack.launcher import Stack

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
LIMIT_QOS0 = LIMIT + "-qos0"
PUBLISHER = "publisher-only"
OURS_QOS0 = "iot-bridge-qos0"
NAIVE = "naive-bridge"
MQB = "mq-bridge"
KAFKA_PERF = "kafka-producer-perf"
ALL_CONTENDERS = (PUBLISHER, LIMIT, LIMIT_QOS0, KAFKA_PERF, OURS, OURS_QOS0, NAIVE, MQB)


@dataclass(frozen=True)
class SuiteOptions:
    quick: bool = False
    duration_s: float = 10.0
    devices: int = 1000
    many_devices: int = 10_000
    payloads: tuple[int, ...] = (1024, 200)
    publisher_processes: int = 2
    window: int = 20_000
    partitions: int = 12
    contenders: tuple[str, ...] = ALL_CONTENDERS
    latency: bool = True
    scaling: bool = True
    bridge_processes: tuple[int, ...] = (2, 4)
    repeats: int = 2  # throughput runs per contender and payload, interleaved; best one counts
    bridge_settings: tuple[tuple[str, str], ...] = ()  # BridgeConfig overrides for iot-bridge
    mq_bridge_args: tuple[str, ...] = ()  # extra bench.mqbridge_route arguments
    out_dir: Path = ROOT / "bench" / "results"
    data_dir: Path | None = None


@dataclass
class SuiteRun:
    options: SuiteOptions
    machine: dict[str, Any]
    results: list[RunResult] = field(default_factory=list)
    started_at: str = ""
    finished_at: str = ""
    wall_s: float = 0.0
    curves: dict[str, list[tuple[float, int]]] = field(default_factory=dict)


# -- the machine -------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem_kb = next(
        (
            int(line.split()[1])
            for line in _read("/proc/meminfo").splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    mosquitto = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["/usr/sbin/mosquitto", "-h"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
        mosquitto = out.splitlines()[0] if out else "unknown"
    libs = ROOT / "kafka" / "broker" / "libs"
    kafka_jar = sorted(p.name for p in libs.glob("kafka_2.13-*.jar")) if libs.exists() else []
    import confluent_kafka

    return {
        "cpu": cpu_model,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "mosquitto": mosquitto,
        "kafka": kafka_jar[0].removesuffix(".jar") if kafka_jar else "unknown",
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "paho_mqtt": _pkg_version("paho-mqtt"),
        "mq_bridge": _pkg_version("mq-bridge"),
        "loadavg_before": _read("/proc/loadavg").split()[:3],
    }


# -- the stack ---------------------------------------------------------------------------------


def _stack_progress(message: str) -> None:
    log.info("stack: %s", message)


# -- one run -----------------------------------------------------------------------------------


class Runner:
    def __init__(self, stack: Stack, options: SuiteOptions, run: SuiteRun) -> None:
        self.stack = stack
        self.opts = options
        self.run = run
        self._topic_n = 0
        self.log_dir = (options.data_dir or Path(tempfile.gettempdir())) / "bench-logs"

    def topic(self, label: str) -> str:
        self._topic_n += 1
        return f"bench.{int(time.time())}.{self._topic_n}.{label}"

    def make_sink(self, contender: str, processes: int, latency: bool) -> tuple[Sink, str | None]:
        s = self.stack
        if contender == PUBLISHER:
            return PublisherOnlySink(), None
        if contender in (LIMIT, LIMIT_QOS0):
            qos = 0 if contender == LIMIT_QOS0 else 1
            return CounterSink(contender, s.mqtt_host, s.mqtt_port, qos=qos, latency=latency), None
        topic = self.topic(contender)
        kw: dict[str, Any] = {
            "name": contender,
            "mqtt_host": s.mqtt_host,
            "mqtt_port": s.mqtt_port,
            "bootstrap": s.kafka_bootstrap,
            "topic": topic,
            "partitions": self.opts.partitions,
            "log_dir": self.log_dir,
        }
        sink: ProcessSink
        if contender in (OURS, OURS_QOS0):
            sink = OurBridgeSink(
                processes=processes, settings=dict(self.opts.bridge_settings), **kw
            )
        elif contender == NAIVE:
            sink = NaiveBridgeSink(**kw)
        elif contender == MQB:
            sink = MqBridgeSink(extra_args=self.opts.mq_bridge_args, **kw)
        else:
            raise ValueError(f"unknown contender {contender}")
        return sink, topic

    def mqtt_run(
        self,
        contender: str,
        scenario: str,
        payload: int,
        *,
        devices: int | None = None,
        processes: int = 1,
        rate: float | None = None,
    ) -> RunResult:
        opts = self.opts
        devices = devices or opts.devices
        qos = 0 if contender in (LIMIT_QOS0, OURS_QOS0) else 1
        duration = opts.duration_s
        warmup = max(1.0, 0.2 * duration)
        result = RunResult(
            contender=contender,
            scenario=scenario,
            payload_bytes=payload,
            devices=devices,
            qos=qos,
            processes=processes,
            offered_rate=rate,
            duration_s=duration,
        )
        latency = scenario == "latency"
        sink: Sink | None = None
        load: LoadGenerator | None = None
        topic: str | None = None
        try:
            sink, topic = self.make_sink(contender, processes, latency)
            sink.start()
            spec = LoadSpec(
                host=self.stack.mqtt_host,
                port=self.stack.mqtt_port,
                devices=devices,
                payload_bytes=payload,
                qos=qos,
                duration_s=duration,
                rate=rate,
                window=opts.window,
                processes=opts.publisher_processes,
            )
            load = LoadGenerator(spec)
            if isinstance(sink, PublisherOnlySink):
                sink.attach(load)
            load.start()
            cpu = CpuMeter(sink.pids())
            mosq_pid = self.stack.mosquitto.process.pid()
            broker = CpuMeter([mosq_pid] if mosq_pid else [])
            load_cpu = CpuMeter(load.pids())
            samples: list[tuple[float, int]] = [(0.0, 0)]
            cpu.start()
            broker.start()
            load_cpu.start()
            latency_from = time.time_ns() // 1_000_000 + int(warmup * 1000)
            if isinstance(sink, CounterSink):
                sink.set_latency_from(latency_from)
            t0 = time.monotonic()
            load.go()
            while True:
                elapsed = time.monotonic() - t0
                d = sink.delivered()
                load.set_delivered(d)
                samples.append((elapsed, d))
                if elapsed >= duration + 0.3:
                    load_cpu.sample()
                    break
                time.sleep(0.05)
            report = load.finish()
            last_d, last_change = -1, time.monotonic()
            stall_s = 3.0 if qos == 0 else 20.0
            while True:
                d = sink.delivered()
                now = time.monotonic()
                samples.append((now - t0, d))
                if d >= report.published:
                    break
                if d != last_d:
                    last_d, last_change = d, now
                elif now - last_change > stall_s:
                    result.notes.append(
                        f"delivery stopped at {d:,} of {report.published:,} published"
                    )
                    break
                time.sleep(0.05)
            drain_s = samples[-1][0] - duration
            result.cpu_s = cpu.used()
            result.broker_cpu_s = broker.used()
            result.load_cpu_s = load_cpu.used()
            result.notes.extend(sink.stop())
            result.peak_rss_mb = sink.peak_rss_mb()
            result.published = report.published
            result.delivered = samples[-1][1]
            result.msgs_per_s = steady_rate(samples, warmup, duration)
            result.cpu_s_per_million = cpu_per_million(result.cpu_s, result.delivered)
            if report.acked < report.published:
                result.notes.append(f"Mosquitto acked only {report.acked:,} publishes")
            if drain_s > 2:
                result.notes.append(f"drain {drain_s:.1f} s")
            if rate is not None and report.published < 0.95 * rate * duration:
                result.notes.append(
                    f"offered {rate:,.0f}/s but the window held the load to "
                    f"{report.published / duration:,.0f}/s"
                )
            key = f"{len(self.run.curves)}/{scenario}/{contender}/{payload}/{processes}/{devices}"
            self.run.curves[key] = samples
            result.curve_key = key
            if isinstance(sink, PublisherOnlySink):
                result.notes.append("no subscriber: the publishers' own ceiling through Mosquitto")
            elif isinstance(sink, CounterSink):
                result.lost = max(0, report.published - (result.delivered or 0))
                if latency:
                    lat = [float(v) for v in sink.latencies]
                    result.latency_p50_ms = percentile(lat, 50)
                    result.latency_p99_ms = percentile(lat, 99)
            elif topic is not None:
                v = verify_topic(
                    self.stack.kafka_bootstrap,
                    topic,
                    report.per_device,
                    latency_from_ms=latency_from if latency else None,
                )
                c = v.check
                result.lost = c.lost
                result.duplicates = c.duplicates
                result.reordered = c.reordered
                result.devices_multi_partition = c.devices_multi_partition
                result.latency_p50_ms = v.latency_p50_ms
                result.latency_p99_ms = v.latency_p99_ms
                if c.unexpected or v.bad_payloads:
                    result.notes.append(
                        f"{c.unexpected} unexpected records, {v.bad_payloads} unreadable"
                    )
                if c.devices_multi_partition:
                    result.notes.append(
                        f"{c.devices_multi_partition} devices span several partitions"
                    )
                result.notes.extend(v.notes)
                sim = (v.sim_missing, v.sim_duplicates, v.sim_order_violations)
                if sim != (c.lost, c.duplicates, c.reordered):
                    result.notes.append(
                        f"iot-sim accounting counts missing/dup/order {sim[0]}/{sim[1]}/{sim[2]}"
                    )
                result.notes.append(
                    "iot-sim accounting: " + ("ok" if v.sim_ok else "FAILED (see JSON)")
                )
        except Exception as exc:
            log.exception("%s %s %s B failed", scenario, contender, payload)
            result.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            if load is not None:
                load.kill()
            if sink is not None:
                with contextlib.suppress(Exception):
                    sink.stop()
        return result

    def producer_perf_run(self, scenario: str, payload: int, rate: float | None) -> RunResult:
        opts = self.opts
        result = RunResult(
            contender=KAFKA_PERF,
            scenario=scenario,
            payload_bytes=payload,
            devices=0,
            qos=1,
            offered_rate=rate,
        )
        try:
            topic = self.topic("perf")
            create_topics(self.stack.kafka_bootstrap, [topic], opts.partitions)
            if rate:
                records = int(rate * opts.duration_s)
            else:
                per_s_guess = 150_000 if payload <= 256 else 80_000
                records = int(per_s_guess * opts.duration_s)
            from bridge.config import BridgeConfig
            from stack.paths import broker_libs_dir

            ours = BridgeConfig()

            argv = producer_performance_argv(
                "java",
                str(broker_libs_dir() / "*"),
                self.stack.kafka_bootstrap,
                topic,
                records=records,
                record_size=payload,
                throughput=rate,
                linger_ms=ours.kafka_linger_ms,
                batch_size=ours.kafka_batch_size,
                compression=ours.kafka_compression,
            )
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out_path = self.log_dir / f"{topic}.log"
            t0 = time.monotonic()
            with out_path.open("wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
                _pid, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - t0
            text = out_path.read_text(errors="replace")
            if proc.returncode != 0:
                raise RuntimeError(f"ProducerPerformance exited {proc.returncode}: {text[-500:]}")
            summary = parse_producer_performance(text)
            result.published = summary.records
            result.delivered = summary.records
            result.duration_s = round(wall, 1)
            result.msgs_per_s = summary.rate
            result.cpu_s = usage.ru_utime + usage.ru_stime
            result.cpu_s_per_million = cpu_per_million(result.cpu_s, summary.records)
            result.peak_rss_mb = usage.ru_maxrss / 1024
            if scenario == "latency":
                result.latency_p50_ms = summary.p50_ms
                result.latency_p99_ms = summary.p99_ms
            result.notes.append("Java producer alone (no MQTT); CPU includes JVM start-up")
        except Exception as exc:
            log.exception("ProducerPerformance failed")
            result.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return result


# -- the suite ---------------------------------------------------------------------------------


def _say(result: RunResult) -> None:
    parts = [
        f"{result.scenario:<10} {result.contender:<22} {result.payload_bytes:>5} B",
        f"dev {result.devices:>6,} procs {result.processes}",
    ]
    if result.error:
        parts.append(f"ERROR {result.error}")
    else:
        parts.append(f"{result.msgs_per_s or 0:>9,.0f} msgs/s")
        if result.latency_p50_ms is not None:
            parts.append(f"p50 {result.latency_p50_ms:.1f} ms p99 {result.latency_p99_ms:.1f} ms")
        if result.cpu_s_per_million is not None:
            parts.append(f"{result.cpu_s_per_million:.1f} CPU s/M")
        if result.lost is not None:
            parts.append(f"lost {result.lost}")
        if result.duplicates is not None:
            parts.append(f"dup {result.duplicates} reordered {result.reordered}")
        if result.notes:
            parts.append("(" + "; ".join(result.notes) + ")")
    print("  ".join(parts), file=sys.stderr, flush=True)


def keep_best(runs: list[RunResult]) -> RunResult:
    """Of repeated runs, the fastest one without error stays "throughput"; the others are
    relabelled "throughput-repeat" (kept in the JSON and the every-run table)."""
    ok = [r for r in runs if r.error is None and r.msgs_per_s is not None]
    # what it sustains *without losing data*: a run that lost messages only counts if all did
    clean = [r for r in ok if not r.lost]
    best = max(clean or ok, key=lambda r: r.msgs_per_s or 0.0) if ok else runs[0]
    if len(runs) > 1:
        rates = ", ".join("failed" if r.error else f"{r.msgs_per_s or 0:,.0f}" for r in runs)
        best.notes.append(f"best of {len(runs)} runs ({rates} msgs/s)")
        lost_elsewhere = sum(r.lost or 0 for r in runs if r is not best)
        if lost_elsewhere:
            best.notes.append(f"the other runs lost {lost_elsewhere}")
    for r in runs:
        if r is not best:
            r.scenario = "throughput-repeat"
    return best


def run_suite(options: SuiteOptions, on_result: Callable[[RunResult], None] = _say) -> SuiteRun:
    run = SuiteRun(options=options, machine=machine_info())
    run.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t_start = time.monotonic()
    own_dir = options.data_dir is None
    data_dir = options.data_dir or Path(tempfile.mkdtemp(prefix="iot-bench-"))
    options = SuiteOptions(**{**options.__dict__, "data_dir": data_dir})
    # Mosquitto + Kafka on free ports in their own data dir (the project's launcher)
    stack = Stack(StackConfig.servers_on_free_ports(data_dir / "stack", options.partitions))
    print(f"starting Mosquitto + Kafka under {data_dir} ...", file=sys.stderr, flush=True)
    stack.up(progress=_stack_progress)
    runner = Runner(stack, options, run)
    want = set(options.contenders)

    def record(result: RunResult) -> None:
        run.results.append(result)
        on_result(result)

    try:
        for payload in options.payloads:
            tries: dict[str, list[RunResult]] = {}
            for _round in range(max(1, options.repeats)):
                for contender in ALL_CONTENDERS:
                    if contender not in want:
                        continue
                    if contender == KAFKA_PERF:
                        r = runner.producer_perf_run("throughput", payload, None)
                    else:
                        r = runner.mqtt_run(contender, "throughput", payload)
                    tries.setdefault(contender, []).append(r)
                    record(r)
            for runs in tries.values():
                keep_best(runs)
        big = max(options.payloads)
        ours = find(run.results, OURS, "throughput", big)
        limit = find(run.results, LIMIT, "throughput", big)
        base = (ours.msgs_per_s if ours and ours.msgs_per_s else None) or (
            limit.msgs_per_s if limit and limit.msgs_per_s else None
        )
        if options.latency and base:
            half = round(base / 2, -2)
            for contender in (LIMIT, KAFKA_PERF, OURS, OURS_QOS0, NAIVE, MQB):
                if contender not in want:
                    continue
                if contender == KAFKA_PERF:
                    record(runner.producer_perf_run("latency", big, half))
                else:
                    record(runner.mqtt_run(contender, "latency", big, rate=half))
        if options.scaling and OURS in want:
            for procs in options.bridge_processes:
                record(runner.mqtt_run(OURS, "scaling", big, processes=procs))
            if options.many_devices and options.many_devices != options.devices:
                record(runner.mqtt_run(OURS, "scaling", big, devices=options.many_devices))
    finally:
        print("stopping Mosquitto + Kafka ...", file=sys.stderr, flush=True)
        stack.down(progress=_stack_progress)
        if own_dir:  # the Kafka data of a full run is over a GB; keep only the logs
            shutil.rmtree(data_dir / "stack", ignore_errors=True)
        print(f"contender logs: {runner.log_dir}", file=sys.stderr, flush=True)
    run.finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    run.wall_s = round(time.monotonic() - t_start, 1)
    run.machine["loadavg_after"] = _read("/proc/loadavg").split()[:3]
    return run
