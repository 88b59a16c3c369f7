"""The ``iot-analytics`` command line: usage, and the report over hand-made tables."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import transforms
from spark_jobs.cli import RELATIVE_VALUE_OPTIONS, _parser, attach_negative_values, main
from tests.spark_jobs.frames import at, kafka_frame, kafka_row, telemetry


def test_help_and_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spark_jobs.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for command in ("stream", "sql", "report", "score"):
        assert command in out.stdout
    version = subprocess.run(
        [sys.executable, "-m", "spark_jobs.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "iot-analytics 0.1.0"


def test_usage_errors_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nonsense"])
    assert exc.value.code == 2
    monkeypatch.setenv("IOT_WATERMARK", "forever")
    assert main(["sql", "SELECT 1"]) == 2


@pytest.mark.parametrize(
    ("argv", "since", "until"),
    [
        (["report", "--since", "-2h", "--out", "var/report"], "-2h", None),  # docs/analytics.md
        (["report", "--since=-30m", "--until", "-1d"], "-30m", "-1d"),
        (["report", "--until", "-90s", "--since", "-1.5h"], "-1.5h", "-90s"),
        (["report", "--since", "2026-01-01T08:00", "--until", "2026-01-01T12:00"],
         "2026-01-01T08:00", "2026-01-01T12:00"),
    ],
)  # fmt: skip
def test_report_takes_relative_times(argv: list[str], since: str, until: str | None) -> None:
    args = _parser().parse_args(argv)
    assert (args.since, args.until) == (since, until)


def test_relative_values_attach_only_to_their_options() -> None:
    attach = attach_negative_values
    assert attach(["--since", "-2h"], RELATIVE_VALUE_OPTIONS) == ["--since=-2h"]
    assert attach(["--since", "-v"], RELATIVE_VALUE_OPTIONS) == ["--since", "-v"]  # an option
    assert attach(["--top", "-2"], RELATIVE_VALUE_OPTIONS) == ["--top", "-2"]
    assert attach(["--", "--since", "-2h"], RELATIVE_VALUE_OPTIONS) == ["--", "--since", "-2h"]
    assert attach(["--since"], RELATIVE_VALUE_OPTIONS) == ["--since"]


def test_report_time_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--since", "--until", "-2h"])  # --since without its value
    assert exc.value.code == 2
    assert "--since: expected one argument" in capsys.readouterr().err
    # a relative-looking value reaches the time parser, which names the accepted forms
    assert main(["report", "--warehouse-dir", str(tmp_path), "--since", "-2x"]) == 1
    assert "not a time: '-2x' (ISO 8601 or -30m/-2h/-1d)" in capsys.readouterr().err


@pytest.mark.spark
def test_sql_without_tables_is_a_runtime_error(spark: Any, tmp_path: Path) -> None:
    assert main(["sql", "--warehouse-dir", str(tmp_path), "SELECT 1"]) == 1


@pytest.mark.spark
def test_report_writes_summary_plots_and_device_table(spark: Any, tmp_path: Path) -> None:
    wh, out = tmp_path / "wh", tmp_path / "report"
    rows = []
    # device a: minutes 0,1,3 with seq 1..9, seq 5 missing; device b: minute 0 only, seq 2 twice
    for seq, minute in [(1, 0), (2, 0), (3, 1), (4, 1), (6, 3), (7, 3), (8, 3), (9, 3)]:
        rows.append(
            kafka_row(
                "a", telemetry(seq, at(minute, seq), t=float(seq)), received_at=at(minute, seq)
            )
        )
    rows += [
        kafka_row("b", telemetry(seq, at(0, seq), t=1.0), received_at=at(0, seq))
        for seq in (1, 2, 2)
    ]
    valid = transforms.valid_telemetry(transforms.parse_telemetry(kafka_frame(spark, rows)))
    transforms.device_minute(valid, ["t"]).write.parquet(str(wh / "device_minute"))
    transforms.fleet_minute(valid, ["t"]).write.parquet(str(wh / "fleet_minute"))
    spark.createDataFrame(
        [("a", at(3, 9), 9, "t", 9.0), ("a", at(3, 8), 8, "t", 8.0), ("b", at(0, 1), 1, "t", 1.0)],
        "device_id string, ts long, seq long, metric string, value double",
    ).selectExpr(
        "device_id", "timestamp_millis(ts) AS event_time", "seq", "metric", "value"
    ).write.parquet(str(wh / "anomalies"))

    code = main(
        [
            "report", "--warehouse-dir", str(wh), "--out", str(out),
            "--since", "2026-01-01T12:00:00", "--until", "2026-01-01T12:04:00",
            "--noise-metric", "t",
        ]
    )  # fmt: skip
    assert code == 0
    summary = (out / "report.md").read_text()
    assert (
        "| devices | minutes in range | messages | duplicates | lost (seq gaps) | anomalies |"
        in summary
    )
    assert "| 2 | 4 | 11 | 1 | 1 | 3 |" in summary  # 8 + 3 messages, b's duplicate, a's seq 5
    for png in ("fleet_messages", "fleet_percentiles", "uptime", "anomalies"):
        data = (out / f"{png}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({png}.png)" in summary
    with (out / "devices.csv").open() as f:
        devices = {r["device_id"]: r for r in csv.DictReader(f)}
    assert float(devices["a"]["uptime"]) == pytest.approx(3 / 4)
    assert float(devices["a"]["loss_rate"]) == pytest.approx(1 / 9)
    assert int(devices["a"]["anomalies"]) == 2
    assert float(devices["b"]["duplicate_rate"]) == pytest.approx(1 / 3)

    assert main(["report", "--warehouse-dir", str(wh), "--out", str(out)]) == 1  # no temperature
    args = ["report", "--warehouse-dir", str(wh), "--out", str(out), "--noise-metric", "t"]
    assert main([*args, "--format", "html"]) == 0
    page = (out / "report.html").read_text()
    assert page.startswith("<!doctype html>")
    assert '<img src="uptime.png">' in page
