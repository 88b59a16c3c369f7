"""The command benchmark's figures from its raw records: round trips, where they went, what
each second of the measured window did, and the telemetry condition's rate.

No sockets or processes; only ``recorded_maximum`` reads a file (the ingest results)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.results import percentile
from commands.model import State

# (command id -> final state, wall-clock seconds this process read it)
Finals = Mapping[str, tuple[State, float]]


def round_trips_ms(sent_at: Mapping[str, float], finals: Finals) -> list[float]:
    """Sorted round trips (ms) of the commands that succeeded."""
    return sorted(
        (seen - sent_at[cid]) * 1000
        for cid, (state, seen) in finals.items()
        if state is State.SUCCEEDED
    )


def other_finals(finals: Finals) -> dict[str, int]:
    """How many commands ended in each final state other than ``succeeded``."""
    other: dict[str, int] = {}
    for state, _ in finals.values():
        if state is not State.SUCCEEDED:
            other[state.value] = other.get(state.value, 0) + 1
    return other


def build_timeline(
    sent_at: Mapping[str, float],
    finals: Finals,
    published: Sequence[tuple[float, int, int]],
    wall_offset: float,
) -> list[dict[str, float | int | None]]:
    """One row per second of the measured window (by the commands' send time): commands sent,
    their round-trip p99 and max (ms, finished ones), and the telemetry published and written
    to Kafka in that second. ``published``: (monotonic time, records in Kafka, published)
    samples; ``wall_offset`` turns their monotonic time into wall-clock time."""
    if not sent_at:
        return []
    start = min(sent_at.values())
    rtts: dict[int, list[float]] = {}
    sent: dict[int, int] = {}
    for cid, t in sent_at.items():
        second = int(t - start)
        sent[second] = sent.get(second, 0) + 1
        final = finals.get(cid)
        if final is not None:
            rtts.setdefault(second, []).append((final[1] - t) * 1000)
    rows: list[dict[str, float | int | None]] = []
    for second in sorted(sent):
        lo, hi = start + second, start + second + 1
        inside = [p for p in published if lo <= p[0] + wall_offset < hi]
        in_kafka = pub = None
        if len(inside) >= 2:
            span = inside[-1][0] - inside[0][0]
            if span > 0:
                in_kafka = round((inside[-1][1] - inside[0][1]) / span)
                pub = round((inside[-1][2] - inside[0][2]) / span)
        values = sorted(rtts.get(second, []))
        p99 = percentile(values, 99)
        rows.append(
            {
                "second": second,
                "commands": sent[second],
                "rtt_ms_p99": round(p99, 1) if p99 is not None else None,
                "rtt_ms_max": round(values[-1], 1) if values else None,
                "telemetry_published_per_s": pub,
                "telemetry_in_kafka_per_s": in_kafka,
            }
        )
    return rows


def stage_breakdown(
    sent_at: Mapping[str, float],
    marks: Mapping[str, Mapping[str, int]],
    finals: Finals,
) -> dict[str, float | None]:
    """Where the round trip went, in ms.

    ``sent_at``: wall-clock seconds each command was handed to the producer; ``marks``: per
    command, the first status ``at`` (epoch ms, the command path's clock) of each state;
    ``finals``: the final state and when this process read it (wall-clock seconds).
    """

    def stage(first: str, second: str, q: float) -> float | None:
        values = [float(m[second] - m[first]) for m in marks.values() if first in m and second in m]
        return percentile(values, q)

    to_path = [
        float(m["accepted"]) - sent_at[cid] * 1000
        for cid, m in marks.items()
        if "accepted" in m and cid in sent_at
    ]
    from_path = [
        seen * 1000 - marks[cid]["succeeded"]
        for cid, (_state, seen) in finals.items()
        if "succeeded" in marks.get(cid, {})
    ]
    return {
        "kafka_to_command_path_p50": percentile(to_path, 50),
        "kafka_to_command_path_p99": percentile(to_path, 99),
        "accepted_to_sent_p50": stage("accepted", "sent", 50),
        "accepted_to_sent_p99": stage("accepted", "sent", 99),
        "sent_to_delivered_p50": stage("sent", "delivered", 50),
        "sent_to_delivered_p99": stage("sent", "delivered", 99),
        "sent_to_succeeded_p50": stage("sent", "succeeded", 50),
        "sent_to_succeeded_p99": stage("sent", "succeeded", 99),
        "status_to_reader_p50": percentile(from_path, 50),
        "status_to_reader_p99": percentile(from_path, 99),
    }


def recorded_maximum(path: Path, payload_bytes: int) -> float | None:
    """The bridge's QoS 1 maximum (1,000 devices, one process) at ``payload_bytes`` in the
    ingest benchmark's recorded results (``make bench``), if there is one."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    rates = [
        float(r["msgs_per_s"])
        for r in doc.get("results", [])
        if r.get("contender") == "iot-bridge-qos1"
        and str(r.get("scenario", "")).startswith("throughput")
        and r.get("payload_bytes") == payload_bytes
        and r.get("processes") == 1
        and r.get("msgs_per_s")
    ]
    return max(rates) if rates else None


def half_of(maximum: float) -> float:
    """Half the maximum, rounded to 100 msgs/s (at least 100)."""
    return max(100.0, round(maximum / 2, -2))
