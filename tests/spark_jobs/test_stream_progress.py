from __future__ import annotations

from spark_jobs.stream import progress_summary


def test_progress_summary_picks_the_numbers() -> None:
    progress = {
        "name": "device_minute",
        "batchId": 7,
        "timestamp": "2026-01-01T12:00:00.000Z",
        "numInputRows": 400,
        "inputRowsPerSecond": 40.0,
        "processedRowsPerSecond": 80.5,
        "durationMs": {"triggerExecution": 4970, "addBatch": 4000},
        "eventTime": {"watermark": "2026-01-01T11:58:00.000Z", "max": "2026-01-01T12:00:00.000Z"},
        "stateOperators": [
            {"numRowsTotal": 63, "numRowsDroppedByWatermark": 2},
            {"numRowsTotal": 7, "numRowsDroppedByWatermark": 1},
        ],
        "sink": {"numOutputRows": 20},
    }
    assert progress_summary(progress) == {
        "query": "device_minute",
        "batch": 7,
        "timestamp": "2026-01-01T12:00:00.000Z",
        "input_rows": 400,
        "input_rows_per_s": 40.0,
        "processed_rows_per_s": 80.5,
        "batch_ms": 4970,
        "dropped_by_watermark": 3,
        "state_rows": 70,
        "watermark": "2026-01-01T11:58:00.000Z",
        "sink_rows": 20,
    }
    empty = progress_summary({"name": "rejects", "batchId": 0})
    assert (empty["input_rows"], empty["dropped_by_watermark"], empty["batch_ms"]) == (0, 0, None)
