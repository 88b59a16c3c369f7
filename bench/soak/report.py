"""The soak run's Markdown summary and plot (from its JSON, so a run can be re-rendered)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.results import fmt_number, md_table
from bench.soak.analysis import MAX_ACK_LAG_P99_S, MAX_RSS_GROWTH, MIN_LAST_TO_FIRST

MAX_TABLE_ROWS = 40


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return fmt_number(value, digits)


def _s(value: Any) -> str:
    """A bucket bound in seconds, as an upper bound."""
    if value is None:
        return "-"
    return "> 30 s" if math.isinf(value) else f"<= {value * 1000:g} ms"


def markdown(doc: dict[str, Any]) -> str:
    opts, fig, back, ver = doc["options"], doc["figures"], doc["readback"], doc["verdict"]
    tally = back["tally"]
    probe = doc.get("probe")
    where = (
        f"{fmt_number(doc['rate'])} msgs/s offered = {opts['fraction']} of the maximum "
        f"{fmt_number(probe['msgs_per_s'])} msgs/s a {probe['seconds']:.0f} s saturation probe "
        "measured on the same stack just before"
        if probe
        else f"{fmt_number(doc['rate'])} msgs/s offered (--rate)"
    )
    m = doc["machine"]
    out = [
        f"# Soak run {doc['started_at']}",
        "",
        f"Our bridge (QoS 1, ack after Kafka) for {opts['duration_s']:.0f} s at {where}; "
        f"{opts['devices']:,} devices (one connection each), {opts['payload_bytes']} B payloads, "
        f"{opts['partitions']} partitions. Machine: {m.get('cpu', '?')}, "
        f"{m.get('cores')} cores, Linux {m.get('kernel', '?')}, {m.get('mosquitto', '?')}, "
        f"{m.get('kafka', '?')}, librdkafka {m.get('librdkafka', '?')}; "
        f"load average at start {doc['loadavg_start']}, at the end "
        f"{doc['loadavg_end']}.",
        "",
        "**Verdict: " + ("OK" if ver["ok"] else "FAIL: " + "; ".join(ver["failures"])) + "**",
        "",
    ]
    w = doc["window_s"]
    out += md_table(
        ["figure", "value", "target"],
        [
            ["msgs/s into Kafka, whole run", _n(doc["steady_msgs_per_s"]), "the offered rate"],
            [f"first / last {w:.0f} s, msgs/s",
             f"{_n(fig['first_rate'])} / {_n(fig['last_rate'])}", ""],
            ["last / first", _n(fig["rate_ratio"], 3), f">= {MIN_LAST_TO_FIRST}"],
            [f"bridge RSS first / last {w:.0f} s (median), MiB",
             f"{_n(fig['rss_first_mb'], 1)} / {_n(fig['rss_last_mb'], 1)}", ""],
            ["bridge RSS last / first", _n(fig["rss_ratio"], 3), f"<= {MAX_RSS_GROWTH}"],
            ["ack lag (delivery report -> PUBACK) p50 / p99",
             f"{_s(fig['ack_lag_p50_s'])} / {_s(fig['ack_lag_p99_s'])}",
             f"p99 < {MAX_ACK_LAG_P99_S:g} s"],
            ["PUBACKs counted by the lag histogram", _n(fig["acked_in_run"]), ""],
            ["published / in Kafka", f"{_n(doc['published'])} / {_n(doc['in_kafka'])}", ""],
            ["lost / duplicates / reordered",
             f"{_n(tally['lost'])} / {_n(tally['duplicates'])} / {_n(tally['reordered'])}",
             "0 lost"],
            ["devices in more than one partition", _n(tally["devices_multi_partition"]), "0"],
            ["publish -> Kafka p50 / p99 / max, ms",
             f"{_n(back['latency_p50_ms'])} / {_n(back['latency_p99_ms'])} / "
             f"{_n(back['latency_max_ms'])}", ""],
            ["read back", f"{back['seconds']:.0f} s, complete: {back['complete']}", ""],
        ],
    )  # fmt: skip
    rows = doc["timeline"]
    step = max(1, -(-len(rows) // MAX_TABLE_ROWS))
    picked = rows[::step]
    if rows and picked[-1] is not rows[-1]:
        picked.append(rows[-1])
    out += ["", "## Over time (every sample interval; a subset when long)", ""]
    out += md_table(
        ["t s", "msgs/s into Kafka", "bridge RSS MiB", "bridge CPU (cores)", "ack lag p99"],
        [
            [_n(r["t_s"], 1), _n(r["msgs_per_s"]), _n(r["bridge_rss_mb"], 1),
             _n(r["bridge_cpu"], 2), _s(r["ack_lag_p99_s"])]
            for r in picked
        ],
    )  # fmt: skip
    return "\n".join(out) + "\n"


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["timeline"]
    t = [r["t_s"] for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(10, 10))
    series = (
        ("msgs_per_s", "msgs/s into Kafka", 1.0),
        ("bridge_rss_mb", "bridge RSS (MiB)", 1.0),
        ("ack_lag_p99_s", "ack lag p99 (ms, bucket bound)", 1000.0),
    )
    for ax, (key, label, scale) in zip(axes, series, strict=True):
        ax.plot(t, [None if r[key] is None else r[key] * scale for r in rows])
        ax.set_ylabel(label)
        ax.set_title(label + " over time")
        ax.set_xlabel("seconds since the steady load started")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
