"""The ingest suite's contenders, what a suite run is asked to do, and what one run holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.results import LIMIT, OURS, RunResult

ROOT = Path(__file__).resolve().parents[1]
LIMIT_QOS0 = LIMIT + "-qos0"
PUBLISHER = "publisher-only"
OURS_QOS0 = "iot-bridge-qos0"
NAIVE = "naive-bridge"
MQB = "mq-bridge"
TELEGRAF = "telegraf"
KAFKA_PERF = "kafka-producer-perf"
ALL_CONTENDERS = (
    PUBLISHER, LIMIT, LIMIT_QOS0, KAFKA_PERF, OURS, OURS_QOS0, NAIVE, MQB, TELEGRAF,
)  # fmt: skip


# the contenders a sharded MQTT tier runs (`--mqtt-shards N`): the others would need an instance
# per shard of a program that has no notion of shards (a subscriber through HAProxy reaches one)
SHARDED_CONTENDERS = (PUBLISHER, LIMIT, LIMIT_QOS0, KAFKA_PERF, OURS, OURS_QOS0)


def qos_of(contender: str) -> int:
    """The MQTT QoS a contender's load is published with."""
    return 0 if contender in (LIMIT_QOS0, OURS_QOS0) else 1


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
    repeats: int = 3  # throughput runs per contender and payload, interleaved; best one counts
    # one unmeasured run of our bridge before the first round: Kafka's JVM compiles its produce
    # path under the first load (it used ~4 s of CPU in our first round against ~1 s later)
    warmup: bool = True
    bridge_settings: tuple[tuple[str, str], ...] = ()  # BridgeConfig overrides for iot-bridge
    mq_bridge_args: tuple[str, ...] = ()  # extra bench.mqbridge_route arguments
    # Mosquitto's save every N changes (None: the stack's default; 0: every 5 s): each save
    # rewrites the whole store, so N sets what the ceiling and the bridges pay for it
    mosquitto_autosave_changes: int | None = None
    mqtt_shards: int = (
        1  # N > 1: N Mosquitto shards behind HAProxy, as `iot-stack up --mqtt-shards N`
    )
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
