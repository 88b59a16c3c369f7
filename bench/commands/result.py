"""The figures of one command benchmark run (``commands.json``'s ``result``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Result:
    started_at: str
    command_path: str
    responder: str
    devices: int
    target_rate: float
    duration_s: float
    warmup_load_s: float
    sent: int
    succeeded: int
    other_final: dict[str, int]
    missing: int
    completed_per_s: float
    rtt_ms_p50: float | None
    rtt_ms_p90: float | None
    rtt_ms_p99: float | None
    rtt_ms_max: float | None
    stages_ms: dict[str, float | None]
    # the telemetry condition
    telemetry_mode: str  # "half" (of the maximum measured in this run) or "fixed"
    telemetry_max_msgs_per_s: float | None  # the higher of the two below
    telemetry_max_measured: float | None  # in this run, before the command phase
    telemetry_max_recorded: float | None  # bench/results/ingest.json (make bench)
    telemetry_rate: float  # offered during the command phase
    telemetry_achieved_msgs_per_s: float | None  # from Kafka watermarks, measured window
    telemetry_in_kafka: int  # telemetry records written during the measured window
    telemetry_payload_bytes: int
    telemetry_devices: int
    telemetry_published: int
    telemetry_acked: int
    # cost
    window_s: float
    cpu_s: dict[str, float | None]
    bridge_cpu_s: float | None
    # Mosquitto's saves in the window (broker_saves.summary), None if it could not be read
    mosquitto_saves: dict[str, float | int] | None = None
    responder_counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # --setting NAME=VALUE
    # per second of the measured window: what the telemetry and the round trips did then
    timeline: list[dict[str, float | int | None]] = field(default_factory=list)
