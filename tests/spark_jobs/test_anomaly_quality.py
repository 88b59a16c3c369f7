"""The streaming job's anomaly query on the simulator's labelled data: precision and recall.

Five seeds of :func:`device_sim.labelled.labelled_run` (our own generator's readings and the
anomalies its scripts planted) go through :func:`spark_jobs.anomaly.anomalies` with the job's
default rule, as one stream (one file per seed, each seed's devices named apart); each seed's
detections are matched to its labels as ``iot-analytics score`` does (device, seq, metric).
Sizes are kept small for the 2-core CI machine (20 devices x 400 readings per seed); the full
figures (50 x 600) come from ``python -m bench.anomaly_quality`` and are in docs/analytics.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_sim.labelled import labelled_run
from spark_jobs.anomaly import AnomalyRule, anomalies, score_against_manifest
from spark_jobs.config import AnalyticsConfig

pytestmark = pytest.mark.spark

SEEDS = (1, 2, 3, 4, 5)
DEVICES, COUNT = 20, 400
SOURCE_DDL = "device_id string, ts long, seq long, metrics map<string,double>"


def test_precision_and_recall_of_the_job_per_seed(
    spark: Any, spark_config: AnalyticsConfig, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    src.mkdir()
    labels: dict[int, dict[str, Any]] = {}
    for seed in SEEDS:
        run = labelled_run(seed, devices=DEVICES, count=COUNT, device_prefix=f"s{seed}")
        labels[seed] = run.manifest()
        lines = (
            json.dumps({"device_id": r.device_id, "ts": r.ts, "seq": r.seq, "metrics": r.metrics})
            for r in run.readings
        )
        (src / f"seed-{seed}.json").write_text("\n".join(lines) + "\n")

    valid = (
        spark.readStream.schema(SOURCE_DDL)
        .json(str(src))
        .select(F.lit("default").alias("tenant"), "device_id", "ts", "seq", "metrics")
    )
    rule = AnomalyRule.from_config(spark_config)  # the job's defaults
    assert rule.log_metrics == frozenset({"vibration"})
    q = (
        anomalies(valid, spark_config.metrics, rule)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(600)
    assert not q.isActive
    assert q.exception() is None

    detected = [
        (r["device_id"], r["seq"], r["metric"]) for r in spark.read.parquet(str(out)).collect()
    ]
    figures = {}
    for seed in SEEDS:
        mine = [d for d in detected if d[0].startswith(f"s{seed}-")]
        s = score_against_manifest(mine, labels[seed])
        figures[seed] = (round(s.precision, 3), round(s.recall, 3))
    print("precision, recall per seed:", figures)
    assert all(p >= 0.9 and r >= 0.9 for p, r in figures.values()), figures
