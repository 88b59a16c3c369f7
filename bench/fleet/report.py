"""The fleet run's Markdown summary and plot (from its JSON, so a run can be re-rendered)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from bench.results import fmt_number, md_table

ROLES = ("mosquitto", "bridge", "kafka", "simulator")
MAX_TABLE_ROWS = 40


def _every(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    step = max(1, -(-len(rows) // limit))
    picked = rows[::step]
    if rows and picked[-1] is not rows[-1]:
        picked.append(rows[-1])
    return picked


def _n(value: Any, digits: int = 0) -> str:
    return "-" if value is None else fmt_number(value, digits)


def _auth(doc: dict[str, Any]) -> str:
    if doc.get("auth") == "per-device credentials":
        took = doc.get("provision_s")
        when = "" if took is None else f", provisioned through the registry in {took:.1f} s"
        return f"Each device logged in with its own credentials{when}."
    return "Mosquitto was anonymous (no device credentials)."


def markdown(doc: dict[str, Any]) -> str:
    opts, conn, thr, ver = doc["options"], doc["connect"], doc["throughput"], doc["verdict"]
    mem, lat = doc["memory_per_connection"], ver["latency"]
    out = [
        f"# Fleet run {doc['run_id']}",
        "",
        f"{opts['devices']:,} devices (one MQTT connection each) x {opts['rate']} msgs/s for "
        f"{opts['duration_s']:.0f} s, {opts['payload_bytes']} B payloads, QoS 1, "
        f"{opts['processes']} simulator processes, connect rate {opts['connect_rate']:.0f}/s; "
        f"machine: {doc['machine'].get('cores')} cores, load average at start "
        f"{' '.join(doc.get('loadavg_start') or [])}, at the end "
        f"{' '.join(doc.get('loadavg_end') or [])}. Mosquitto's open-file limit: "
        f"{_n(doc.get('mosquitto_open_files_limit'))}. {_auth(doc)}",
        "",
        "**Verdict: " + ("OK" if ver["ok"] else "FAIL: " + "; ".join(ver["failures"])) + "**",
        "",
    ]
    out += md_table(
        ["figure", "value"],
        [
            ["devices connected at once (peak)", _n(conn["peak_connected"])],
            ["first / all devices connected after",
             f"{_n(conn.get('first_connected_s'), 1)} s / {_n(conn['all_connected_s'], 1)} s"],
            ["connects/s achieved (first to last)", _n(conn["connects_per_s"], 1)],
            ["connect failures (retried) / devices failed",
             f"{_n(conn['connect_failures'])} / {_n(conn['devices_failed'])}"],
            ["target msgs/s", _n(thr["target_msgs_per_s"])],
            ["published msgs/s", _n(thr["published_msgs_per_s"], 1)],
            ["into Kafka msgs/s", _n(thr["into_kafka_msgs_per_s"], 1)],
            ["sent / unique in Kafka", f"{_n(ver['sent'])} / {_n(ver['unique'])}"],
            ["missing (acknowledged) / duplicates",
             f"{_n(ver['missing'])} ({_n(ver['missing_acked'])}) / {_n(ver['duplicates'])}"],
            ["latency device -> Kafka p50 / p95 / p99 / max (ms)",
             " / ".join(_n(lat[k]) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))],
            ["RSS per connection, Mosquitto", f"{_n(mem.get('mosquitto_kib'), 1)} KiB"],
            ["RSS per connection, simulator", f"{_n(mem.get('simulator_kib'), 1)} KiB"],
            ["simulator CPU", f"{_n(thr['simulator_cpu_s'], 1)} s"],
            ["fleet run / verification", f"{_n(doc['fleet_s'], 1)} s / {_n(doc['verify_s'], 1)} s"],
        ],
    )  # fmt: skip
    out += ["", "## Samples (CPU in cores, RSS in MiB)", ""]
    head = ["t s", "connected", "published", *(f"{r} CPU / RSS" for r in ROLES)]
    out += md_table(
        head,
        [
            [
                _n(s["t_s"], 1),
                _n(s["connected"]),
                _n(s["published"]),
                *(f"{_n(s[f'{r}_cpu'], 2)} / {_n(s[f'{r}_rss_mb'])}" for r in ROLES),
            ]
            for s in _every(doc["samples"], MAX_TABLE_ROWS)
        ],
    )
    timeline = doc["latency_timeline"]
    if timeline:
        t0 = timeline[0]["start_ms"]
        out += ["", "## Latency over time (device ts -> Kafka, ms, by Kafka time)", ""]
        out += md_table(
            ["window start s", "records", "p50", "p95", "p99", "max"],
            [
                [_n((w["start_ms"] - t0) / 1000, 0), _n(w["count"]),
                 *(_n(w[k]) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))]
                for w in _every(timeline, MAX_TABLE_ROWS)
            ],
        )  # fmt: skip
    return "\n".join(out) + "\n"


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = doc["samples"]
    t = [s["t_s"] for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(10, 13), sharex=False)
    ax = axes[0]
    ax.plot(t, [s["connected"] for s in samples], label="devices connected")
    ax.set_ylabel("connected")
    ax2 = ax.twinx()
    rates = [0.0] + [
        (b["published"] - a["published"]) / (b["t_s"] - a["t_s"]) if b["t_s"] > a["t_s"] else 0.0
        for a, b in itertools.pairwise(samples)
    ]
    ax2.plot(t, rates, color="tab:orange", label="published msgs/s")
    ax2.set_ylabel("msgs/s")
    ax.set_title("fleet: connections and publish rate")
    ax.legend(loc="upper left")
    ax2.legend(loc="upper right")
    timeline = doc["latency_timeline"]
    ax = axes[1]
    if timeline:
        start_wall = samples[0]["wall_ms"] if samples else timeline[0]["start_ms"]
        tt = [(w["start_ms"] - start_wall) / 1000 for w in timeline]
        for key in ("p50_ms", "p95_ms", "p99_ms"):
            ax.plot(tt, [w[key] for w in timeline], label=key.replace("_ms", ""))
        ax.set_yscale("symlog")
        ax.legend()
    ax.set_ylabel("ms")
    ax.set_title(f"latency device ts -> Kafka, per {doc['options']['timeline_s']:.0f} s window")
    for ax, suffix, label in ((axes[2], "_cpu", "CPU (cores)"), (axes[3], "_rss_mb", "RSS (MiB)")):
        for role in ROLES:
            ax.plot(t, [s[role + suffix] or 0 for s in samples], label=role)
        ax.set_ylabel(label)
        ax.set_title(label + " over time")
        ax.legend()
    for ax in axes:
        ax.set_xlabel("seconds since the fleet started")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
