"""Anomalies: readings far from the device's own recent baseline.

Method (robust z-score against a rolling per-device, per-metric baseline):

- every device keeps, per metric, its last ``history`` readings (in ``seq`` order);
- a new reading ``x`` is scored once the device has at least ``min_history`` readings of that
  metric: ``score = |t(x) - median| / scale`` over the transformed history ``t(h)``, with
  ``scale = max(1.4826 * MAD, rel_floor * |median|, abs_floor)`` (MAD: median absolute
  deviation; 1.4826 * MAD estimates the standard deviation of normal noise, and unlike the
  standard deviation it is not inflated by the outliers we look for);
- ``t`` is the identity for most metrics and ``sign(x) * log1p(|x|)`` for the metrics of
  ``log_metrics`` (skewed, non-negative metrics such as vibration, whose natural spikes are
  multiplicative: on a log scale a x4..x10 spike is a small step and a x20..x50 fault a large
  one, while on the raw scale both are far from the median); ``score > threshold`` (or
  ``log_threshold`` for a log-scored metric) makes it an anomaly;
- every reading then joins the history (a lasting level change becomes the new baseline after
  about ``history / 2`` readings); a repeated ``seq`` (at-least-once redelivery) is skipped.
  The history keeps raw values (the transform is applied when scoring), so the state of a
  checkpoint written before a metric became log-scored stays valid.

The scoring is plain Python (:func:`score_readings`), unit-tested without Spark; the streaming
wrapper (:func:`anomalies`) runs that same function per device with ``applyInPandasWithState``,
so the baselines live in the checkpointed state store and a restart resumes them.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.config import AnalyticsConfig

MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True, slots=True)
class AnomalyRule:
    history: int = 60
    min_history: int = 10
    threshold: float = 10.0
    rel_floor: float = 0.01
    abs_floor: float = 0.05
    log_metrics: frozenset[str] = frozenset({"vibration"})
    log_threshold: float = 12.0

    @classmethod
    def from_config(cls, cfg: AnalyticsConfig) -> AnomalyRule:
        return cls(
            history=cfg.anomaly_history,
            min_history=cfg.anomaly_min_history,
            threshold=cfg.anomaly_threshold,
            rel_floor=cfg.anomaly_rel_floor,
            abs_floor=cfg.anomaly_abs_floor,
            log_metrics=frozenset(cfg.anomaly_log_metrics),
            log_threshold=cfg.anomaly_log_threshold,
        )

    def threshold_of(self, metric: str) -> float:
        return self.log_threshold if metric in self.log_metrics else self.threshold


@dataclass(frozen=True, slots=True)
class Reading:
    seq: int
    ts: int
    metrics: Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class Anomaly:
    seq: int
    ts: int
    metric: str
    value: float
    baseline: float
    scale: float
    score: float


@dataclass(slots=True)
class Baseline:
    """One device's recent readings per metric, and the seqs already seen."""

    values: dict[str, deque[float]] = field(default_factory=dict)
    seqs: deque[int] = field(default_factory=deque)

    def to_json(self) -> str:
        return json.dumps({"v": {k: list(v) for k, v in self.values.items()}, "s": list(self.seqs)})

    @classmethod
    def from_json(cls, text: str, rule: AnomalyRule) -> Baseline:
        doc = json.loads(text)
        return cls(
            values={k: deque(v, maxlen=rule.history) for k, v in doc["v"].items()},
            seqs=deque(doc["s"], maxlen=4 * rule.history),
        )


def _median(sorted_values: Sequence[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    if n % 2:
        return sorted_values[mid]
    return (sorted_values[mid - 1] + sorted_values[mid]) / 2.0


def signed_log1p(x: float) -> float:
    """``sign(x) * log1p(|x|)``: the log scale of the log-scored metrics, defined for every x."""
    return math.copysign(math.log1p(abs(x)), x)


def signed_expm1(y: float) -> float:
    """The inverse of :func:`signed_log1p`."""
    return math.copysign(math.expm1(abs(y)), y)


def robust_score(
    history: Iterable[float], x: float, rule: AnomalyRule, *, log_scale: bool = False
) -> tuple[float, float, float]:
    """(score, median, scale) of ``x`` against ``history``.

    With ``log_scale`` both are transformed by :func:`signed_log1p` first; the median is then
    given back in the metric's units and the scale stays in log units.
    """
    if log_scale:
        x = signed_log1p(x)
        history = (signed_log1p(v) for v in history)
    values = sorted(history)
    med = _median(values)
    mad = _median(sorted(abs(v - med) for v in values))
    scale = max(MAD_TO_SIGMA * mad, rule.rel_floor * abs(med), rule.abs_floor)
    return abs(x - med) / scale, (signed_expm1(med) if log_scale else med), scale


def score_readings(
    readings: Iterable[Reading], baseline: Baseline, rule: AnomalyRule
) -> list[Anomaly]:
    """Score ``readings`` (in seq order) against ``baseline``, updating it; returns anomalies."""
    if baseline.seqs.maxlen is None:
        baseline.seqs = deque(baseline.seqs, maxlen=4 * rule.history)
    seen = set(baseline.seqs)
    found: list[Anomaly] = []
    for r in sorted(readings, key=lambda r: r.seq):
        if r.seq in seen:
            continue
        seen.add(r.seq)
        baseline.seqs.append(r.seq)
        for metric, x in r.metrics.items():
            if x is None or (isinstance(x, float) and math.isnan(x)):
                continue
            hist = baseline.values.get(metric)
            if hist is None:
                hist = baseline.values[metric] = deque(maxlen=rule.history)
            if len(hist) >= rule.min_history:
                log_scale = metric in rule.log_metrics
                score, med, scale = robust_score(hist, x, rule, log_scale=log_scale)
                if score > rule.threshold_of(metric):
                    found.append(Anomaly(r.seq, r.ts, metric, float(x), med, scale, score))
            hist.append(float(x))
        if len(seen) > 8 * rule.history:
            seen = set(baseline.seqs)
    return found


# --- Spark ------------------------------------------------------------------------------------

ANOMALY_COLUMNS = (
    "tenant",
    "device_id",
    "seq",
    "ts",
    "metric",
    "value",
    "baseline",
    "scale",
    "score",
)
OUTPUT_DDL = (
    "tenant string, device_id string, seq long, ts long, metric string, value double, "
    "baseline double, scale double, score double"
)
STATE_DDL = "baseline string"


def _state_fn(rule: AnomalyRule, metrics: Sequence[str]) -> Any:
    import pandas as pd

    def fn(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[Any]:
        tenant, device_id = str(key[0]), str(key[1])
        baseline = Baseline.from_json(state.get[0], rule) if state.exists else Baseline()
        readings: list[Reading] = []
        for pdf in frames:
            cols = [pdf[m].tolist() for m in metrics]
            for i, (seq, ts) in enumerate(
                zip(pdf["seq"].tolist(), pdf["ts"].tolist(), strict=True)
            ):
                readings.append(
                    Reading(int(seq), int(ts), {m: cols[j][i] for j, m in enumerate(metrics)})
                )
        found = score_readings(readings, baseline, rule)
        state.update((baseline.to_json(),))
        yield pd.DataFrame(
            {
                "tenant": [tenant] * len(found),
                "device_id": [device_id] * len(found),
                "seq": [a.seq for a in found],
                "ts": [a.ts for a in found],
                "metric": [a.metric for a in found],
                "value": [a.value for a in found],
                "baseline": [a.baseline for a in found],
                "scale": [a.scale for a in found],
                "score": [a.score for a in found],
            },
            columns=list(ANOMALY_COLUMNS),
        ).astype(
            {
                "seq": "int64",
                "ts": "int64",
                "value": "float64",
                "baseline": "float64",
                "scale": "float64",
                "score": "float64",
            }
        )

    return fn


def anomalies(valid: Any, metrics: Sequence[str], rule: AnomalyRule) -> Any:
    """Streaming ``DataFrame -> DataFrame``: the anomalous readings of :func:`valid_telemetry`.

    Stateful (``applyInPandasWithState``, append mode), so it needs a streaming input; the
    pure core is :func:`score_readings`.
    """
    from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)
    from pyspark.sql.streaming.state import GroupStateTimeout

    narrow = valid.select(
        "tenant", "device_id", "seq", "ts", *[F.col("metrics")[m].alias(m) for m in metrics]
    )
    # one baseline per (tenant, device): same-named devices of two tenants are two devices
    out = narrow.groupBy("tenant", "device_id").applyInPandasWithState(
        _state_fn(rule, list(metrics)),
        OUTPUT_DDL,
        STATE_DDL,
        "append",
        GroupStateTimeout.NoTimeout,
    )
    return out.select(
        "tenant",
        "device_id",
        F.timestamp_millis("ts").alias("event_time"),
        "seq",
        "metric",
        "value",
        "baseline",
        "scale",
        "score",
    )


# --- scoring against the simulator's ground truth ------------------------------------------


@dataclass(frozen=True, slots=True)
class Score:
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 1.0

    @property
    def recall(self) -> float:
        planted = self.true_positives + self.false_negatives
        return self.true_positives / planted if planted else 1.0


def score_against_manifest(
    detected: Iterable[tuple[str, int, str]], manifest: Mapping[str, Any]
) -> Score:
    """Precision/recall of detected (device, seq, metric) against the manifest's injections.

    A detection matches a planted anomaly when device, seq and metric are equal. Readings the
    manifest does not list (natural spikes of the sensor model included) count as false
    positives.
    """
    planted = {
        (str(a["device"]), int(a["seq"]), str(a["metric"]))
        for a in (manifest.get("injections") or {}).get("anomalies", [])
    }
    found = set(detected)
    tp = len(found & planted)
    return Score(tp, len(found - planted), len(planted - found))


@dataclass(frozen=True, slots=True)
class WindowScore:
    """Detections against labelled windows (NAB's labels): no point-wise truth exists there."""

    windows: int
    windows_hit: int  # windows with at least one detection inside
    detections: int
    detections_inside: int  # detections that fall inside some window

    @property
    def precision(self) -> float:
        return self.detections_inside / self.detections if self.detections else 1.0

    @property
    def recall(self) -> float:
        return self.windows_hit / self.windows if self.windows else 1.0


def score_against_windows(
    detected_ts: Iterable[int], windows: Sequence[tuple[int, int]]
) -> WindowScore:
    """Window recall (windows with a detection) and precision (detections inside a window).

    ``windows`` are inclusive ``(start, end)`` pairs on the detections' time axis.
    """
    found = list(detected_ts)
    hit = sum(1 for lo, hi in windows if any(lo <= t <= hi for t in found))
    inside = sum(1 for t in found if any(lo <= t <= hi for lo, hi in windows))
    return WindowScore(len(windows), hit, len(found), inside)
