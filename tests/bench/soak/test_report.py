from pathlib import Path

import pytest

from bench.soak.cli import main, write
from bench.soak.options import SoakOptions, from_args, parser
from bench.soak.run import summarize

BOUNDS = [0.001, 0.01, 0.1, 1.0, float("inf")]


def _raw_doc() -> dict:
    samples = [
        {
            "t_s": 5.0 * i,
            "delivered": 4000 * 5 * i,
            "published": 4000 * 5 * i,
            "bridge_rss_mb": 45.0 + (i % 2),
            "bridge_cpu": 0.5,
            "ack_lag": [1000.0 * i, 1990.0 * i, 2000.0 * i, 2000.0 * i, 2000.0 * i],
        }
        for i in range(13)
    ]
    tally = {
        "expected": 240_000, "received": 240_003, "distinct": 240_000, "lost": 0,
        "duplicates": 3, "reordered": 0, "unexpected": 0, "devices_multi_partition": 0,
    }  # fmt: skip
    return {
        "options": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in vars(SoakOptions(duration_s=60, window_s=20, rate=4000)).items()
        },
        "machine": {"cpu": "test CPU", "cores": 2},
        "started_at": "2026-11-26T12:00:00Z",
        "loadavg_start": [0.1, 0.1, 0.1],
        "loadavg_end": [1.0, 0.5, 0.2],
        "rate": 4000.0,
        "topic": "bench.soak.1",
        "published": 240_000,
        "acked_by_mosquitto": 240_000,
        "in_kafka": 240_003,
        "bridge_rss_end_mb": 46.0,
        "bridge_notes": [],
        "samples": samples,
        "bounds": BOUNDS,
        "readback": {
            "tally": tally,
            "latency_p50_ms": 4,
            "latency_p99_ms": 20,
            "latency_max_ms": 90,
            "unreadable": 0,
            "seconds": 3.2,
            "complete": True,
        },
    }


def test_a_run_renders_its_figures_table_and_plot(tmp_path: Path) -> None:
    doc = summarize(_raw_doc(), SoakOptions(duration_s=60, window_s=20, rate=4000))
    assert doc["verdict"] == {"ok": True, "failures": []}
    paths = write(doc, tmp_path, "soak")
    text = paths[1].read_text()
    assert "**Verdict: OK**" in text
    assert "| last / first | 1.000 | >= 0.95 |" in text
    assert "<= 1 ms / <= 10 ms" in text  # ack lag p50 / p99 as bucket bounds
    assert "0 / 3 / 0" in text  # lost / duplicates / reordered
    assert paths[2].stat().st_size > 10_000  # a real PNG


def test_render_recomputes_the_verdict_from_the_json(tmp_path: Path) -> None:
    raw = _raw_doc()
    raw["readback"]["tally"]["lost"] = 5
    doc = summarize(raw, SoakOptions(duration_s=60, window_s=20, rate=4000))
    path = write(doc, tmp_path, "run")[0]
    assert main(["--render", str(path)]) == 0
    assert "FAIL: 5 messages lost" in (tmp_path / "run.md").read_text()


def test_options_defaults_are_the_issues_and_bad_ones_are_refused() -> None:
    opts = from_args(parser().parse_args([]))
    assert (opts.duration_s, opts.fraction, opts.rate, opts.compare_window_s) == (
        1800,
        0.8,
        None,
        300,
    )
    short = from_args(parser().parse_args(["--duration", "100"]))
    assert short.compare_window_s == 20
    with pytest.raises(SystemExit, match="--fraction must be in"):
        from_args(parser().parse_args(["--fraction", "1.5"]))
