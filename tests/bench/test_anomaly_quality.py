from __future__ import annotations

import pytest

from bench import anomaly_quality


def test_prints_a_row_per_seed_and_the_nab_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert anomaly_quality.main(["--seeds", "1,2", "--devices", "3", "--count", "60"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2
    assert all(len(r.strip("|").split("|")) == 7 for r in rows)
    # the NAB slice's figures are those docs/analytics.md gives
    assert out[-1].endswith("33 detections, 33 inside a window (precision 1.000), "
                            "2/2 windows found (recall 1.000)")  # fmt: skip


def test_seed_ranges() -> None:
    assert anomaly_quality._seeds("1-5") == [1, 2, 3, 4, 5]
    assert anomaly_quality._seeds("1,4,9") == [1, 4, 9]
