"""Writes a suite run as JSON, a Markdown page and a PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cpu_share import cpu_share_table
from bench.results import (
    LIMIT,
    LOW_LOAD,
    OURS,
    RunResult,
    find,
    ratio,
)
from bench.results_tables import (
    fmt_range,
    paired_ratios,
    runs_table,
    scaling_table,
    spread_table,
    throughput_runs,
    throughput_table,
    value_range,
)
from bench.suite_options import SuiteOptions, SuiteRun


def to_json(run: Any) -> dict[str, Any]:
    opts = run.options
    return {
        "suite": "ingest",
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "wall_s": run.wall_s,
        "machine": run.machine,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in opts.__dict__.items()},
        "results": [r.to_dict() for r in run.results],
        "curves": run.curves,
    }


def headline(results: list[RunResult], payload: int) -> list[str]:
    """The issue's targets, stated against this run's numbers."""
    ours = find(results, OURS, "throughput", payload)
    limit = find(results, LIMIT, "throughput", payload)
    naive = find(results, "naive-bridge", "throughput", payload)
    mqb = find(results, "mq-bridge", "throughput", payload)
    lines = []
    r_limit = ratio(ours.msgs_per_s if ours else None, limit.msgs_per_s if limit else None)
    r_naive = ratio(ours.msgs_per_s if ours else None, naive.msgs_per_s if naive else None)
    r_mqb = ratio(ours.msgs_per_s if ours else None, mqb.msgs_per_s if mqb else None)
    our_runs = throughput_runs(results, OURS, payload)

    def over_runs(rng: tuple[float, float, int] | None, digits: int) -> str:
        if rng is None or rng[2] < 2:
            return ""
        return f" (min-max over {rng[2]} runs: {fmt_range(rng, digits)})"

    if r_limit is not None:
        rng = value_range(paired_ratios(our_runs, throughput_runs(results, LIMIT, payload)))
        lines.append(
            f"- {payload} B, QoS 1 ack-after-Kafka: our bridge sustains **{r_limit:.2f}** of "
            f"the same-run Mosquitto one-to-one ceiling{over_runs(rng, 2)} (target >= 0.95)."
        )
    if r_naive is not None:
        lines.append(f"- {payload} B: vs the naive bridge **{r_naive:.1f}x** (target >= 2x).")
    if r_mqb is not None:
        rng = value_range(paired_ratios(our_runs, throughput_runs(results, "mq-bridge", payload)))
        lines.append(
            f"- {payload} B: vs mq-bridge **{r_mqb:.2f}x**{over_runs(rng, 2)} (target > 1)."
        )
    telegraf = find(results, "telegraf", "throughput", payload)
    r_tg = ratio(ours.msgs_per_s if ours else None, telegraf.msgs_per_s if telegraf else None)
    if r_tg is not None:
        rng = value_range(paired_ratios(our_runs, throughput_runs(results, "telegraf", payload)))
        lines.append(f"- {payload} B: vs Telegraf **{r_tg:.2f}x**{over_runs(rng, 2)}.")
    if ours is not None and ours.cpu_s_per_million is not None:
        others = [
            f"{r.contender} {r.cpu_s_per_million:.1f}"
            for r in (naive, mqb, telegraf)
            if r is not None and r.cpu_s_per_million is not None
        ]
        cpu_rng = value_range(r.cpu_s_per_million for r in our_runs)
        lines.append(
            f"- {payload} B: CPU per million messages: ours {ours.cpu_s_per_million:.1f} s"
            + over_runs(cpu_rng, 1)
            + (f" (vs {', '.join(others)})" if others else "")
            + (f"; peak RSS {ours.peak_rss_mb:.0f} MB" if ours.peak_rss_mb else "")
            + "."
        )
    ceiling = find(results, "publisher-only", "throughput", payload)
    not_bridges = (LIMIT, LIMIT + "-qos0", "kafka-producer-perf", "publisher-only")

    def fastest(qos: int) -> float | None:
        return max(
            (
                r.msgs_per_s
                for r in results
                if r.scenario == "throughput"
                and r.payload_bytes == payload
                and r.qos == qos
                and r.contender not in not_bridges
                and r.msgs_per_s
            ),
            default=None,
        )

    if ceiling is not None and ceiling.msgs_per_s:
        parts = []
        for qos in (1, 0):
            top = fastest(qos)
            if top:
                margin = ceiling.msgs_per_s / top
                verdict = (
                    "the publisher is not what limits them"
                    if margin > 1.2
                    else "TOO CLOSE: these may be limited by the load, not the bridge"
                )
                parts.append(f"{margin:.1f}x the fastest QoS {qos} bridge ({verdict})")
        if parts:
            lines.append(
                f"- {payload} B: load check: with no subscriber the publisher pushed "
                f"{ceiling.msgs_per_s:,.0f} msgs/s into Mosquitto at QoS 1: "
                + "; ".join(parts)
                + "."
            )
    for scenario, label, target in (
        ("latency", "half of our maximum", "p99 < 50 ms"),
        (LOW_LOAD, "1 % of our maximum", "p50 < 5 ms, p99 < 20 ms"),
    ):
        lat = find(results, OURS, scenario, payload)
        if lat is not None and lat.latency_p50_ms is not None:
            lines.append(
                f"- {payload} B: publish -> Kafka at {label} ({lat.offered_rate or 0:,.0f} "
                f"msgs/s): our bridge p50 {lat.latency_p50_ms:.0f} / p99 "
                f"{lat.latency_p99_ms or 0:.0f} ms (target {target}){_legs(lat)}."
            )
    if ours is not None and ours.lost is not None:
        lines.append(
            f"- {payload} B: our bridge lost {ours.lost} and duplicated {ours.duplicates} of "
            f"{ours.published or 0:,} messages in that run (checked by seq per device)."
        )
    return lines


def _legs(lat: RunResult) -> str:
    """Where the latency went, when the records carry our bridge's ``received_at``."""
    if lat.to_bridge_p99_ms is None or lat.to_kafka_p99_ms is None:
        return ""
    return (
        f"; publish -> bridge p50 {lat.to_bridge_p50_ms or 0:.0f} / p99 "
        f"{lat.to_bridge_p99_ms:.0f} ms, bridge -> Kafka p50 {lat.to_kafka_p50_ms or 0:.0f} / "
        f"p99 {lat.to_kafka_p99_ms:.0f} ms"
    )


def from_json(data: dict[str, Any]) -> SuiteRun:
    """A suite run read back from its JSON (to re-render the table and plot)."""
    opts = dict(data["options"])
    for key in ("out_dir", "data_dir"):
        if opts.get(key) is not None:
            opts[key] = Path(opts[key])
    for key in ("payloads", "contenders", "bridge_processes"):
        opts[key] = tuple(opts[key])
    opts["bridge_settings"] = tuple(tuple(kv) for kv in opts.get("bridge_settings", ()))
    opts["mq_bridge_args"] = tuple(opts.get("mq_bridge_args", ()))
    run = SuiteRun(options=SuiteOptions(**opts), machine=data["machine"])
    run.results = [RunResult.from_dict(r) for r in data["results"]]
    run.started_at = data["started_at"]
    run.finished_at = data["finished_at"]
    run.wall_s = data["wall_s"]
    run.curves = {k: [(float(t), int(n)) for t, n in v] for k, v in data["curves"].items()}
    return run


def _autosave_line(changes: int | None) -> str:
    if changes is None:  # a run recorded before the setting was
        return ""
    every = f"every {changes:,} changes" if changes else "every 5 s"
    return f" Mosquitto saves its store {every}."


def _shards_line(shards: int) -> str:
    if shards <= 1:
        return ""
    return (
        f" MQTT tier: {shards} Mosquitto shards behind HAProxy, as `iot-stack up --mqtt-shards "
        f"{shards}` (devices hashed by client id); the ceiling counts on every shard's own port, "
        "each bridge process reads one shard; Mosquitto's CPU is every shard's, HAProxy's is in "
        "the notes."
    )


def to_markdown(run: Any) -> str:
    m = run.machine
    opts = run.options
    results: list[RunResult] = run.results
    payloads = list(opts.payloads)
    lines = [
        "# Ingest benchmark" + (" (quick)" if opts.quick else ""),
        "",
        f"Run {run.started_at} -> {run.finished_at} ({run.wall_s:.0f} s wall).",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
        f"Linux {m.get('kernel')}, Python {m.get('python')}; {m.get('mosquitto')}; "
        f"{m.get('kafka')} (KRaft, single node); confluent-kafka {m.get('confluent_kafka')} "
        f"(librdkafka {m.get('librdkafka')}); paho-mqtt {m.get('paho_mqtt')}; "
        f"mq-bridge {m.get('mq_bridge')}; Telegraf {m.get('telegraf', '-')}. Load average before: "
        f"{' '.join(m.get('loadavg_before', []))}, after: {' '.join(m.get('loadavg_after', []))}."
        + _autosave_line(opts.mosquitto_autosave_changes)
        + _shards_line(opts.mqtt_shards),
        "",
        f"Load: {opts.devices:,} devices (one MQTT connection each) published by "
        f"{opts.publisher_processes} raw-socket publisher processes, "
        f"{opts.duration_s:g} s per run (first {max(1.0, 0.2 * opts.duration_s):g} s "
        f"excluded as warm-up), end-to-end window {opts.window:,} messages; "
        f"Kafka topics with {opts.partitions} partitions, acks=all, idempotent producers.",
        "",
    ]
    for p in payloads:
        lines += headline(results, p)
    lines += [
        "",
        "## Throughput, latency, cost",
        "",
        "msgs/s = sustained delivery rate (Mosquitto's counting subscriber; Kafka topic high "
        "watermarks for the bridges); latency = publish -> Kafka append (broker LogAppendTime) "
        "at half of our QoS 1 maximum, 1 KiB; CPU = the contender's own processes per million "
        "delivered messages (max over payload sizes); lost/dup/reordered summed over its runs, "
        "checked by reading the topic back and matching (device, seq).",
        "",
        throughput_table(results, payloads),
        "",
        "### Spread over the repeated throughput runs",
        "",
        "Every throughput figure above is the best of its runs; min-max over all of them "
        "(ratios paired with the same round's limit and our bridge's run):",
        "",
        spread_table(results, payloads),
        "",
        "### Who holds the CPU (QoS 1 throughput rounds)",
        "",
        "Cores = CPU seconds over the run's seconds (the CPU counts to the end of the drain, "
        "so a figure can pass 1.00 per thread or the machine's cores by a few hundredths). "
        "Mosquitto is single-threaded: the "
        "ceiling is its one thread near a whole core with the machine not full; behind our "
        "bridge the same Mosquitto shares the machine with the bridge, Kafka and the "
        "publishers, and gets what they leave.",
        "",
        cpu_share_table(results, payloads, int(m.get("cores") or 0)),
        "",
        "## Scaling of our bridge (QoS 1, shared subscription for several processes)",
        "",
        scaling_table(results),
        "",
        "## Every run",
        "",
        runs_table(results),
        "",
    ]
    return "\n".join(lines)


def plot(run: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results: list[RunResult] = run.results
    payloads = list(run.options.payloads)
    contenders: list[str] = []
    for res in results:
        if res.scenario.startswith("throughput") and res.contender not in contenders:
            contenders.append(res.contender)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    ax = axes[0]
    width = 0.8 / max(1, len(payloads))
    for i, p in enumerate(payloads):
        values = []
        for c in contenders:
            r = find(results, c, "throughput", p)
            values.append((r.msgs_per_s or 0) if r else 0)
        xs = [j + i * width for j in range(len(contenders))]
        ax.bar(xs, values, width=width, label=f"{p} B")
    ax.set_xticks([j + width * (len(payloads) - 1) / 2 for j in range(len(contenders))])
    ax.set_xticklabels(contenders, rotation=30, ha="right")
    ax.set_ylabel("msgs/s")
    ax.set_title("Sustained throughput")
    ax.legend()

    ax = axes[1]
    big = max(payloads)
    for r in results:
        if r.scenario != "throughput" or r.payload_bytes != big or r.curve_key is None:
            continue
        samples = run.curves.get(r.curve_key, [])
        ax.plot([t for t, _ in samples], [n for _, n in samples], label=r.contender)
    ax.set_xlabel("seconds since start of publishing")
    ax.set_ylabel("messages delivered")
    ax.set_title(f"Delivered over time ({big} B)")
    if ax.get_lines():
        ax.legend(fontsize=8)

    ax = axes[2]
    rows = [r for r in results if r.contender == OURS and r.scenario in ("throughput", "scaling")]
    rows = [r for r in rows if r.payload_bytes == big]
    labels = [f"{r.processes} proc\n{r.devices:,} dev" for r in rows]
    ax.bar(range(len(rows)), [r.msgs_per_s or 0 for r in rows], color="tab:green")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("msgs/s")
    ax.set_title(f"iot-bridge scaling (QoS 1, {big} B)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_all(run: Any, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "ingest-quick" if run.options.quick else "ingest"
    paths = {
        "json": out_dir / f"{stem}.json",
        "md": out_dir / f"{stem}.md",
        "png": out_dir / f"{stem}.png",
    }
    paths["json"].write_text(json.dumps(to_json(run), indent=1) + "\n")
    paths["md"].write_text(to_markdown(run))
    plot(run, paths["png"])
    return paths
