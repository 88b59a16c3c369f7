"""The command benchmark's outputs: the JSON document and ``commands.md`` (condition, verdict,
figures, cost, machine)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.commands.options import HALF
from bench.progress import say
from bench.results import fmt_number, md_table

TARGET_P99_MS = 100


def _fmt(value: Any, digits: int = 1) -> str:
    return fmt_number(value, digits)


def target_met(r: Mapping[str, Any]) -> bool:
    """p99 under 100 ms, every command finished, at least 95% of the target rate completed."""
    return (
        r["rtt_ms_p99"] is not None
        and r["rtt_ms_p99"] < TARGET_P99_MS
        and r["missing"] == 0
        and r["completed_per_s"] >= 0.95 * r["target_rate"]
    )


def _condition(r: Mapping[str, Any]) -> str:
    if r["telemetry_mode"] != HALF:
        return f"telemetry at a fixed {_fmt(r['telemetry_rate'], 0)} msgs/s"
    return (
        f"telemetry at half the bridge's maximum ({_fmt(r['telemetry_max_msgs_per_s'], 0)} "
        f"msgs/s: the higher of {_fmt(r.get('telemetry_max_measured'), 0)} measured in this "
        f"run and {_fmt(r.get('telemetry_max_recorded'), 0)} recorded by the ingest "
        f"benchmark) -> offered {_fmt(r['telemetry_rate'], 0)} msgs/s"
    )


def _saves_line(saved: Mapping[str, Any] | None) -> str:
    if saved is None:
        return "Mosquitto's saves in the measured window: not read (not our Mosquitto)."
    return (
        f"Mosquitto's saves in the measured window: {saved['saves']}, "
        f"{_fmt(saved['written_mb'], 0)} MB written (largest {_fmt(saved['largest_mb'], 0)} MB, "
        f"longest {_fmt(saved['longest_s'], 2)} s, {saved['share_of_window']:.0%} of the "
        "window); each rewrites the whole store, and Mosquitto serves no client meanwhile."
    )


def render_markdown(doc: Mapping[str, Any]) -> str:
    """``commands.md``: the condition, the verdict, the figures, the cost, the machine."""
    r = doc["result"]
    m = doc.get("machine", {})
    tmax = r["telemetry_max_msgs_per_s"]
    lines = [
        "# Command round-trip benchmark",
        "",
        f"Run {doc.get('started_at', '?')} -> {doc.get('finished_at', '?')} "
        f"({_fmt(doc.get('wall_s'))} s wall), `python -m bench.commands_rtt "
        f"{' '.join(doc.get('argv', []))}`.",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}, Python "
        f"{m.get('python', '?')}; {m.get('mosquitto', '?')}; {m.get('kafka', '?')}; "
        f"librdkafka {m.get('librdkafka', '?')}. Load average before: "
        f"{' '.join(m.get('loadavg_before', []))}, after: {' '.join(m.get('loadavg_after', []))}.",
        "",
        f"Condition: {r['devices']:,} online devices ({r['responder']} responder), commands at "
        f"{_fmt(r['target_rate'], 0)}/s for {_fmt(r['duration_s'], 0)} s measured (after "
        f"{_fmt(r['warmup_load_s'], 0)} s unmeasured at the same rate), command path "
        f"`{r['command_path']}`; {_condition(r)}, {r['telemetry_payload_bytes']:,} B payloads "
        f"from {r['telemetry_devices']:,} other devices at QoS 1.",
        "",
        f"- Target p99 < {TARGET_P99_MS} ms at {_fmt(r['target_rate'], 0)} commands/s: "
        + ("**met**" if target_met(r) else "**missed**")
        + f" (p99 {_fmt(r['rtt_ms_p99'])} ms, {_fmt(r['completed_per_s'], 0)} commands/s "
        f"completed, {r['missing']:,} without a final state).",
        f"- Telemetry achieved in the measured window: "
        f"{_fmt(r['telemetry_achieved_msgs_per_s'], 0)} msgs/s into Kafka "
        f"({r['telemetry_in_kafka']:,} records)"
        + (
            f" = {r['telemetry_achieved_msgs_per_s'] / tmax:.2f} of the maximum"
            if tmax and r["telemetry_achieved_msgs_per_s"] is not None
            else ""
        )
        + ".",
        f"- {_saves_line(r.get('mosquitto_saves'))}",
        "",
        "## Round trip (send to `succeeded` read back from Kafka)",
        "",
        *md_table(
            [
                "sent",
                "succeeded",
                "other final",
                "missing",
                "commands/s",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
            ],
            [
                [
                    f"{r['sent']:,}",
                    f"{r['succeeded']:,}",
                    ", ".join(f"{k} {v}" for k, v in r["other_final"].items()) or "0",
                    f"{r['missing']:,}",
                    _fmt(r["completed_per_s"], 0),
                    *(_fmt(r[k]) for k in ("rtt_ms_p50", "rtt_ms_p90", "rtt_ms_p99", "rtt_ms_max")),
                ]
            ],
        ),
        "",
        "## Stage breakdown (ms)",
        "",
        "Status `at` times are the command path's clock; the reader's are this process's "
        "(same machine).",
        "",
        *md_table(["stage", "ms"], [[k, _fmt(v)] for k, v in r["stages_ms"].items()]),
        "",
        f"## CPU seconds in the measured window ({_fmt(r['window_s'])} s; "
        f"{m.get('cores', '?')} cores = {_fmt((m.get('cores') or 0) * r['window_s'])} CPU s)",
        "",
        *md_table(
            ["process", "CPU s", "cores busy"],
            [
                [
                    k,
                    _fmt(v, 2),
                    _fmt(v / r["window_s"] if v is not None and r["window_s"] else None, 2),
                ]
                for k, v in r["cpu_s"].items()
            ],
        ),
        "",
    ]
    if r["responder_counts"]:
        lines += [
            "Responder: " + ", ".join(f"{k} {v:,}" for k, v in r["responder_counts"].items()) + ".",
            "",
        ]
    if r["notes"]:
        lines += ["Notes:", "", *(f"- {n}" for n in r["notes"]), ""]
    return "\n".join(lines)


def full_document(
    result: Mapping[str, Any],
    *,
    finished_at: str,
    wall_s: float,
    argv: Sequence[str],
    machine: Mapping[str, Any],
) -> dict[str, Any]:
    """``commands.json``: the result with when, how long, the command line and the machine."""
    return {
        "started_at": result["started_at"],
        "finished_at": finished_at,
        "wall_s": wall_s,
        "argv": list(argv),
        "machine": dict(machine),
        "result": dict(result),
    }


def write_outputs(full: Mapping[str, Any], out: Path | None, out_dir: Path | None) -> None:
    """``--out``: the result's JSON; ``--out-dir``: ``commands.json`` and ``commands.md``."""
    if out is not None:
        out.write_text(json.dumps(full["result"], indent=2) + "\n")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "commands.json").write_text(json.dumps(full, indent=2) + "\n")
        (out_dir / "commands.md").write_text(render_markdown(full))
        say(f"wrote {out_dir / 'commands.json'} and commands.md")
