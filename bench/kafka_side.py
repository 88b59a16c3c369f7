"""The Kafka side of a run: fresh topics, live progress from watermarks, the post-run check."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from dataclasses import dataclass, field

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.results import SeqCheck, check_sequences, percentile
from device_sim.accounting import DeviceExpectation, Expectations, TelemetryRecord, account

log = logging.getLogger(__name__)

PROBE_DEVICE = "probe"


class KafkaSideError(Exception):
    """A topic could not be created or read."""


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """New topics stamped by the broker (LogAppendTime): a record's time is when Kafka has it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = [
        NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=1,
            config={"message.timestamp.type": "LogAppendTime"},
        )
        for name in names
    ]
    for name, fut in admin.create_topics(specs, operation_timeout=30).items():
        try:
            fut.result(timeout=60)
        except KafkaException as exc:
            raise KafkaSideError(f"cannot create topic {name}: {exc}") from exc
    # a new topic's partitions get their leaders a moment later: wait until all answer
    for name in names:
        wm = Watermarks(bootstrap, name, partitions)
        try:
            deadline = time.monotonic() + 60
            while not wm.all_answer():
                if time.monotonic() > deadline:
                    raise KafkaSideError(f"topic {name}: partitions without a leader after 60 s")
                time.sleep(0.1)
        finally:
            wm.close()


class Watermarks:
    """Counts the records in a topic from its partitions' high watermarks (no fetching)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-watermarks",
                "enable.auto.commit": False,
            }
        )
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._last = [0] * partitions

    def all_answer(self) -> bool:
        """True when every partition reports its watermarks (it has a leader)."""
        try:
            for tp in self._tps:
                self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)
        except KafkaException:
            return False
        return True

    def count(self) -> int:
        """Records in the topic now; a partition that does not answer keeps its last count."""
        for i, tp in enumerate(self._tps):
            try:
                _low, high = self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)
            except KafkaException:
                continue
            self._last[i] = max(high, self._last[i])
        return sum(self._last)

    def close(self) -> None:
        self._consumer.close()


@dataclass
class Verification:
    check: SeqCheck
    records: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    bad_payloads: int = 0
    # the same latency in two legs, from our bridge's ``received_at`` header (None: no header):
    # publish -> bridge (publisher, Mosquitto, the bridge's read) and bridge -> Kafka append
    # (linger, produce, the broker); the percentiles of each leg, not of a sum
    to_bridge_p50_ms: float | None = None
    to_bridge_p99_ms: float | None = None
    to_kafka_p50_ms: float | None = None
    to_kafka_p99_ms: float | None = None
    first_append_ms: int | None = None
    last_append_ms: int | None = None
    notes: list[str] = field(default_factory=list)
    # the same records through the simulator's verifier (iot-sim verify's accounting)
    sim_ok: bool | None = None
    sim_missing: int | None = None
    sim_duplicates: int | None = None
    sim_order_violations: int | None = None


def read_whole_topic(bootstrap: str, topic: str) -> tuple[Consumer, dict[int, int]]:
    """A consumer assigned to every non-empty partition of ``topic`` from offset 0, and each
    one's end (high watermark) now: read until a record at ``end - 1`` came from each. The
    caller closes the consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-verify-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends: dict[int, int] = {}
        for p in meta.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    except BaseException:
        consumer.close()
        raise
    return consumer, ends


def received_at(headers: object) -> int | None:
    """Our bridge's ``received_at`` header (epoch ms) from a consumed record's headers (a list
    of pairs, or None); None if absent or unreadable."""
    if not isinstance(headers, list):
        return None
    for name, value in headers:
        if name == "received_at":
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None


def verify_topic(
    bootstrap: str,
    topic: str,
    expected: dict[str, int],
    latency_from_ms: int | None = None,
    timeout_s: float = 120.0,
) -> Verification:
    """Read the whole topic; check every (device, seq) and measure publish-to-Kafka latency.

    The device comes from the payload's ``dev`` tag (every contender keeps the payload), the
    latency is the broker's append time minus the publisher's ``ts``; only records whose ``ts``
    is at or after ``latency_from_ms`` count (to skip a warm-up).
    """
    consumer, remaining = read_whole_topic(bootstrap, topic)
    try:
        triples: list[tuple[str, int, int]] = []
        sim_records: list[TelemetryRecord] = []
        latencies: list[float] = []
        to_bridge: list[float] = []
        to_kafka: list[float] = []
        bad = 0
        first_ms: int | None = None
        last_ms: int | None = None
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error():
                    continue
                p = msg.partition()
                off = msg.offset()
                if p is None or off is None:
                    continue
                if p in remaining and off >= remaining[p] - 1:
                    del remaining[p]
                value = msg.value() or b""
                try:
                    doc = orjson.loads(value)
                    dev = doc["tags"]["dev"]
                    seq = int(doc["seq"])
                    ts = int(doc["ts"])
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    bad += 1
                    continue
                if dev == PROBE_DEVICE:
                    continue
                triples.append((dev, seq, p))
                _kind, append_ms = msg.timestamp()
                if append_ms is None:
                    continue
                # the simulator numbers seqs from 1, the benchmark load from 0
                sim_records.append(TelemetryRecord(dev, seq + 1, p, off, append_ms, ts))
                first_ms = append_ms if first_ms is None else min(first_ms, append_ms)
                last_ms = append_ms if last_ms is None else max(last_ms, append_ms)
                if latency_from_ms is not None and ts >= latency_from_ms:
                    latencies.append(float(append_ms - ts))
                    received_ms = received_at(msg.headers())
                    if received_ms is not None:
                        to_bridge.append(float(received_ms - ts))
                        to_kafka.append(float(append_ms - received_ms))
        notes = []
        if remaining:
            notes.append(f"verification timed out with {len(remaining)} partitions unread")
        check = check_sequences(triples, expected)
        sim = account(
            Expectations({d: DeviceExpectation(sent=n) for d, n in expected.items()}),
            sim_records,
        )
        return Verification(
            sim_ok=sim.ok,
            sim_missing=sim.missing,
            sim_duplicates=sim.duplicates,
            sim_order_violations=sim.order_violations,
            check=check,
            records=len(triples),
            latency_p50_ms=percentile(latencies, 50),
            latency_p99_ms=percentile(latencies, 99),
            bad_payloads=bad,
            to_bridge_p50_ms=percentile(to_bridge, 50),
            to_bridge_p99_ms=percentile(to_bridge, 99),
            to_kafka_p50_ms=percentile(to_kafka, 50),
            to_kafka_p99_ms=percentile(to_kafka, 99),
            first_append_ms=first_ms,
            last_append_ms=last_ms,
            notes=notes,
        )
    finally:
        consumer.close()


# -- Kafka's own producer benchmark ----------------------------------------------------------------

_PP_LINE = re.compile(
    r"(?P<records>\d+) (?P<steady>steady state )?records sent, "
    r"(?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency"
    r"(?:, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th)?"
)


@dataclass(frozen=True)
class PerfSummary:
    records: int
    rate: float
    p50_ms: float | None
    p99_ms: float | None


def parse_producer_performance(output: str) -> PerfSummary:
    """The summary of ``ProducerPerformance``: the steady-state line (after its warm-up
    records) if there is one, else the final line with percentiles."""
    summaries = [m for m in map(_PP_LINE.search, output.splitlines()) if m and m.group("p50")]
    steady = [m for m in summaries if m.group("steady")]
    chosen = steady or summaries
    if not chosen:
        raise KafkaSideError("no ProducerPerformance summary line in its output")
    m = chosen[-1]
    return PerfSummary(
        records=int(m.group("records")),
        rate=float(m.group("rate")),
        p50_ms=float(m.group("p50")),
        p99_ms=float(m.group("p99")),
    )


def producer_performance_argv(
    java: str,
    classpath: str,
    bootstrap: str,
    topic: str,
    *,
    records: int,
    record_size: int,
    throughput: float | None,
    linger_ms: int = 5,
    batch_size: int = 262144,
    compression: str = "lz4",
) -> list[str]:
    """Kafka's producer benchmark with the same durability settings as the bridge."""
    return [
        java,
        "-Xmx512m",
        "-cp",
        classpath,
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--warmup-records",
        str(records // 5),
        "--throughput",
        str(int(throughput)) if throughput else "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "acks=all",
        "enable.idempotence=true",
        f"linger.ms={linger_ms}",
        f"batch.size={batch_size}",
        f"compression.type={compression}",
    ]


def run_process(argv: list[str], timeout: float) -> tuple[int, str, float | None]:
    """Run to completion; (exit code, stdout+stderr, CPU seconds of the child)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, proc.stdout + proc.stderr, cpu
