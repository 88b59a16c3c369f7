"""One contender in one scenario of the ingest suite: its sink (subscriber or bridge), the
publisher load, the delivered-over-time samples, CPU, and what reached Kafka intact."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.kafka_side import (
    create_topics,
    parse_producer_performance,
    producer_performance_argv,
    verify_topic,
)
from bench.load import LoadGenerator, LoadReport, LoadSpec
from bench.process_sinks import (
    MqBridgeSink,
    NaiveBridgeSink,
    OurBridgeSink,
    ProcessSink,
    TelegrafSink,
)
from bench.procstat import CpuMeter, MachineCpuMeter
from bench.results import LIMIT, OURS, RunResult, cpu_per_million, percentile, steady_rate
from bench.sinks import CounterSink, PublisherOnlySink, ShardedCounterSink, Sink, SinkError
from bench.suite_options import (
    KAFKA_PERF,
    LIMIT_QOS0,
    MQB,
    NAIVE,
    OURS_QOS0,
    PUBLISHER,
    ROOT,
    SHARDED_CONTENDERS,
    TELEGRAF,
    SuiteOptions,
    SuiteRun,
    qos_of,
)
from stack.launcher import Stack

log = logging.getLogger(__name__)


class Runner:
    def __init__(self, stack: Stack, options: SuiteOptions, run: SuiteRun) -> None:
        self.stack = stack
        self.opts = options
        self.run = run
        self._topic_n = 0
        self.log_dir = (options.data_dir or Path(tempfile.gettempdir())) / "bench-logs"
        # hooks of bench.profile_bridge: another checkout of our bridge, and a callback
        # told the sink once the load starts (to profile it)
        self.bridge_root: Path | None = None
        self.on_go: Callable[[Sink], None] | None = None

    def topic(self, label: str) -> str:
        self._topic_n += 1
        return f"bench.{int(time.time())}.{self._topic_n}.{label}"

    def make_sink(self, contender: str, processes: int, latency: bool) -> tuple[Sink, str | None]:
        s = self.stack
        if contender == PUBLISHER:
            return PublisherOnlySink(), None
        shards = s.config.mqtt_shard_ports
        if shards and contender not in SHARDED_CONTENDERS:
            raise SinkError(f"{contender} has no run on MQTT shards")
        if contender in (LIMIT, LIMIT_QOS0):
            qos = 0 if contender == LIMIT_QOS0 else 1
            if shards:
                return ShardedCounterSink(
                    contender, s.mqtt_host, shards, qos=qos, latency=latency
                ), None
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
                processes=processes * max(1, len(shards)),  # `processes` per shard
                shard_ports=shards,
                settings=dict(self.opts.bridge_settings),
                root=self.bridge_root,
                **kw,
            )
        elif contender == NAIVE:
            sink = NaiveBridgeSink(**kw)
        elif contender == MQB:
            sink = MqBridgeSink(extra_args=self.opts.mq_bridge_args, **kw)
        elif contender == TELEGRAF:
            sink = TelegrafSink(**kw)
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
        duration_s: float | None = None,
    ) -> RunResult:
        opts = self.opts
        devices = devices or opts.devices
        qos = qos_of(contender)
        duration = duration_s or opts.duration_s
        warmup = max(1.0, 0.2 * duration)
        result = RunResult(
            contender=contender,
            scenario=scenario,
            payload_bytes=payload,
            devices=devices,
            qos=qos,
            processes=processes,
            shards=max(1, len(self.stack.mqtt_shards)),
            offered_rate=rate,
            duration_s=duration,
        )
        latency = scenario.startswith("latency")  # "latency" (half load), "latency-low" (1 %)
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
            shards = self.stack.mqtt_shards or [self.stack.mosquitto]
            broker = CpuMeter([p for p in (m.process.pid() for m in shards) if p])
            front_pid = self.stack.haproxy.process.pid() if self.stack.mqtt_shards else None
            front = CpuMeter([front_pid] if front_pid else [])
            load_cpu = CpuMeter(load.pids())
            kafka_pids = [n.process.pid() for n in self.stack.kafka_nodes]
            kafka_cpu = CpuMeter([p for p in kafka_pids if p])
            machine_cpu = MachineCpuMeter()
            samples: list[tuple[float, int]] = [(0.0, 0)]
            cpu.start()
            broker.start()
            front.start()
            load_cpu.start()
            kafka_cpu.start()
            machine_cpu.start()
            latency_from = time.time_ns() // 1_000_000 + int(warmup * 1000)
            if isinstance(sink, CounterSink):
                sink.set_latency_from(latency_from)
            t0 = time.monotonic()
            load.go()
            if self.on_go is not None:
                self.on_go(sink)
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
            if front_pid:
                result.front_cpu_s = front.used()
                result.notes.append(f"HAProxy {result.front_cpu_s:.1f} CPU s")
            result.load_cpu_s = load_cpu.used()
            result.kafka_cpu_s = kafka_cpu.used()
            result.machine_cpu_s = machine_cpu.used()
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
            self._account(result, sink, topic, report, latency_from if latency else None)
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

    def _account(
        self,
        result: RunResult,
        sink: Sink,
        topic: str | None,
        report: LoadReport,
        latency_from: int | None,
    ) -> None:
        """What arrived: losses, duplicates, order and latency (measured from epoch ms
        ``latency_from`` on, None: no latency), from the subscriber or the Kafka topic."""
        if isinstance(sink, PublisherOnlySink):
            result.notes.append("no subscriber: the publishers' own ceiling through Mosquitto")
        elif isinstance(sink, CounterSink | ShardedCounterSink):
            result.lost = max(0, report.published - (result.delivered or 0))
            if latency_from is not None:
                lat = [float(v) for v in sink.latencies]
                result.latency_p50_ms = percentile(lat, 50)
                result.latency_p99_ms = percentile(lat, 99)
        elif topic is not None:
            v = verify_topic(
                self.stack.kafka_bootstrap,
                topic,
                report.per_device,
                latency_from_ms=latency_from,
            )
            c = v.check
            result.lost = c.lost
            result.duplicates = c.duplicates
            result.reordered = c.reordered
            result.devices_multi_partition = c.devices_multi_partition
            result.latency_p50_ms = v.latency_p50_ms
            result.latency_p99_ms = v.latency_p99_ms
            result.to_bridge_p50_ms = v.to_bridge_p50_ms
            result.to_bridge_p99_ms = v.to_bridge_p99_ms
            result.to_kafka_p50_ms = v.to_kafka_p50_ms
            result.to_kafka_p99_ms = v.to_kafka_p99_ms
            if c.unexpected or v.bad_payloads:
                result.notes.append(
                    f"{c.unexpected} unexpected records, {v.bad_payloads} unreadable"
                )
            if c.devices_multi_partition:
                result.notes.append(f"{c.devices_multi_partition} devices span several partitions")
            result.notes.extend(v.notes)
            sim = (v.sim_missing, v.sim_duplicates, v.sim_order_violations)
            if sim != (c.lost, c.duplicates, c.reordered):
                result.notes.append(
                    f"iot-sim accounting counts missing/dup/order {sim[0]}/{sim[1]}/{sim[2]}"
                )
            result.notes.append(
                "iot-sim accounting: " + ("ok" if v.sim_ok else "FAILED (see JSON)")
            )

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
