"""bench.fleet's pure parts: memory per connection, options, the Markdown and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.fleet.cli import write
from bench.fleet.options import from_args, parser
from bench.fleet.run import memory_per_connection

ROLES = ("mosquitto", "bridge", "kafka", "simulator")


def _sample(t: float, connected: int, published: int, mosq: float, sim: float) -> dict[str, Any]:
    row: dict[str, Any] = {"t_s": float(t), "wall_ms": 1_000_000 + int(t * 1000)}
    for role in ROLES:
        row[f"{role}_cpu"] = 0.1
        row[f"{role}_rss_mb"] = 100.0
    row.update(mosquitto_rss_mb=mosq, simulator_rss_mb=sim, connected=connected)
    row.update(published=published, acked=published, awaiting_ack=0, connect_failures=0)
    return row


SAMPLES = [
    _sample(0, 0, 0, 8.0, 40.0),  # before the fleet: only the bench process
    _sample(5, 0, 0, 8.0, 120.0),  # workers started, nothing connected
    _sample(10, 500, 0, 13.0, 170.0),
    _sample(15, 1000, 0, 18.0, 220.0),  # all connected: +10 MiB Mosquitto, +100 MiB simulator
    _sample(20, 1000, 5000, 25.0, 230.0),
]


def test_memory_per_connection_from_the_samples() -> None:
    mem = memory_per_connection(SAMPLES, 1000)
    assert mem["at_sample_t_s"] == 15
    assert mem["mosquitto_kib"] == round(10 * 1024 / 1000, 1)
    assert mem["simulator_kib"] == round(100 * 1024 / 1000, 1)
    assert memory_per_connection(SAMPLES, 2000) == {}  # never all connected


def test_defaults_are_the_issues_thirty_minutes_and_twenty_thousand_devices() -> None:
    opts = from_args(parser().parse_args([]))
    assert (opts.duration_s, opts.devices, opts.processes) == (1800.0, 20_000, 4)
    short = from_args(parser().parse_args(["--duration", "120", "--devices", "3000"]))
    assert (short.duration_s, short.devices, short.processes) == (120.0, 3000, 2)


def test_markdown_and_plot_written(tmp_path: Path) -> None:
    timeline = [
        {"start_ms": 1_010_000 + 10_000 * i, "window_ms": 10_000, "count": 100,
         "p50_ms": 5.0 + i, "p95_ms": 50.0, "p99_ms": 90.0, "max_ms": 120.0}
        for i in range(3)
    ]  # fmt: skip
    doc = {
        "run_id": "r1",
        "options": {"devices": 1000, "rate": 1.0, "duration_s": 60.0, "payload_bytes": 512,
                    "processes": 2, "connect_rate": 500.0, "timeline_s": 10.0},
        "machine": {"cores": 2},
        "loadavg_start": ["1.0", "1.0", "1.0"],
        "loadavg_end": ["2.0", "1.0", "1.0"],
        "mosquitto_open_files_limit": 20000,
        "connect": {"peak_connected": 1000, "first_connected_s": 5.0, "all_connected_s": 15.0,
                    "connects_per_s": 100.0, "connect_failures": 0, "devices_failed": 0},
        "throughput": {"target_msgs_per_s": 1000, "published_msgs_per_s": 990.0,
                       "into_kafka_msgs_per_s": 985.0, "simulator_cpu_s": 12.0},
        "fleet_s": 80.0,
        "verify_s": 2.0,
        "memory_per_connection": memory_per_connection(SAMPLES, 1000),
        "samples": SAMPLES,
        "latency_timeline": timeline,
        "verdict": {"ok": True, "failures": [], "sent": 5000, "unique": 5000, "missing": 0,
                    "missing_acked": 0, "duplicates": 0,
                    "latency": {"p50_ms": 6.0, "p95_ms": 50.0, "p99_ms": 90.0, "max_ms": 120.0}},
    }  # fmt: skip
    json_path, md_path, png_path = write(doc, tmp_path, "fleet")
    md = md_path.read_text()
    assert "**Verdict: OK**" in md
    assert "| connects/s achieved (first to last) | 100.0 |" in md
    assert "| RSS per connection, Mosquitto | 10.2 KiB |" in md
    assert "| 20.0 | 1,000 | 5,000 |" in md  # the last sample row
    assert "| 20 | 100 | 7 | 50 | 90 | 120 |" in md  # the third latency window
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json_path.exists()


def test_credentials_are_the_default_and_the_report_says_how_devices_logged_in() -> None:
    assert from_args(parser().parse_args([])).insecure_anonymous is False
    assert from_args(parser().parse_args(["--insecure-anonymous"])).insecure_anonymous is True
    from bench.fleet.report import _auth

    assert "own credentials" in _auth({"auth": "per-device credentials", "provision_s": 12.5})
    assert "12.5 s" in _auth({"auth": "per-device credentials", "provision_s": 12.5})
    assert "anonymous" in _auth({})  # runs recorded before credentials
