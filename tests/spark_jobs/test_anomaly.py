from __future__ import annotations

import pytest

from spark_jobs.anomaly import (
    AnomalyRule,
    Baseline,
    Reading,
    robust_score,
    score_against_manifest,
    score_readings,
)

RULE = AnomalyRule(history=10, min_history=5, threshold=4.0, rel_floor=0.0, abs_floor=0.01)


def test_robust_score_known_values() -> None:
    # median 3, absolute deviations [2,1,0,1,2] -> MAD 1, scale 1.4826
    score, med, scale = robust_score([1.0, 2.0, 3.0, 4.0, 5.0], 10.0, RULE)
    assert med == 3.0
    assert scale == pytest.approx(1.4826)
    assert score == pytest.approx(7.0 / 1.4826)


def test_floors_bound_the_scale_of_flat_signals() -> None:
    rule = AnomalyRule(rel_floor=0.01, abs_floor=0.05)
    _, med, scale = robust_score([100.0] * 10, 100.0, rule)
    assert (med, scale) == (100.0, 1.0)  # 1% of |median| beats the absolute floor
    _, _, scale = robust_score([0.0] * 10, 0.0, rule)
    assert scale == 0.05


def _readings(values: list[float], start_seq: int = 1) -> list[Reading]:
    return [Reading(start_seq + i, 1000 * i, {"t": v}) for i, v in enumerate(values)]


def test_spike_is_found_with_its_score() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 3.0]
    found = score_readings(_readings(values), Baseline(), RULE)
    assert len(found) == 1
    a = found[0]
    assert (a.seq, a.ts, a.metric, a.value, a.baseline) == (6, 5000, "t", 10.0, 3.0)
    assert a.score == pytest.approx(7.0 / 1.4826)


def test_nothing_scored_before_min_history() -> None:
    assert score_readings(_readings([1.0, 1.0, 1.0, 1.0, 500.0]), Baseline(), RULE) == []


def test_order_by_seq_duplicates_skipped_and_state_resumes() -> None:
    baseline = Baseline()
    first = _readings([1.0, 2.0, 3.0, 4.0, 5.0])
    assert score_readings(list(reversed(first)), baseline, RULE) == []
    assert list(baseline.values["t"]) == [1.0, 2.0, 3.0, 4.0, 5.0]  # joined in seq order
    # a redelivered seq 3 with another value is ignored; the spike of seq 6 is found
    again = [Reading(3, 0, {"t": 999.0}), Reading(6, 0, {"t": 10.0})]
    restored = Baseline.from_json(baseline.to_json(), RULE)
    found = score_readings(again, restored, RULE)
    assert [(a.seq, a.value) for a in found] == [(6, 10.0)]
    assert len(restored.values["t"]) == 6


def test_history_is_bounded_and_missing_metrics_skipped() -> None:
    baseline = Baseline()
    readings = [Reading(i, 0, {"t": float(i), "h": None}) for i in range(1, 31)]
    score_readings(readings, baseline, AnomalyRule(history=10, min_history=5, threshold=1e9))
    assert list(baseline.values["t"]) == [float(i) for i in range(21, 31)]
    assert "h" not in baseline.values


def test_precision_and_recall_against_a_manifest() -> None:
    manifest = {
        "injections": {
            "anomalies": [
                {"device": "d1", "seq": 5, "metric": "temperature"},
                {"device": "d1", "seq": 9, "metric": "humidity"},
                {"device": "d2", "seq": 5, "metric": "temperature"},
            ]
        }
    }
    detected = [("d1", 5, "temperature"), ("d2", 5, "temperature"), ("d2", 6, "vibration")]
    s = score_against_manifest(detected, manifest)
    assert (s.true_positives, s.false_positives, s.false_negatives) == (2, 1, 1)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(2 / 3)
    empty = score_against_manifest([], {"injections": {"anomalies": []}})
    assert (empty.precision, empty.recall) == (1.0, 1.0)
