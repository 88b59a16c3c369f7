from __future__ import annotations

import math

import orjson
import pytest

from bench.amqp_upload import main, percentile, reading


def test_a_reading_is_about_one_kib_of_valid_telemetry() -> None:
    body = reading(7)
    assert 1000 <= len(body) <= 1048
    doc = orjson.loads(body)
    assert doc["seq"] == 7
    assert isinstance(doc["ts"], int)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert math.isnan(percentile([], 50))


@pytest.mark.parametrize(
    "bad",
    [
        ["--runs", "0"],
        ["--seconds", "-1"],
        ["--generators", "0"],
        ["--north-messages", "0"],
        ["--north-credit", "-5"],
    ],
)
def test_bad_settings_are_refused_before_anything_starts(
    bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(bad)
    assert exit_.value.code == 2
    assert "must be > 0" in capsys.readouterr().err
