"""Builders of small hand-made frames for the spark tests."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from spark_jobs import schemas

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
T0_MS = int(T0.timestamp() * 1000)


def at(minute: int, second: float = 0.0) -> int:
    """Epoch ms of T0 + minute:second."""
    return T0_MS + minute * 60_000 + int(second * 1000)


def ts(ms: int) -> dt.datetime:
    """A naive UTC datetime, as Spark returns timestamps with session time zone UTC."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).replace(tzinfo=None)


def kafka_row(
    key: str | None,
    value: Any,
    *,
    received_at: int | None = None,
    offset: int = 0,
    kafka_ms: int = T0_MS,
) -> tuple[Any, ...]:
    body = value if isinstance(value, bytes) else json.dumps(value).encode()
    headers = [("mqtt_topic", f"devices/{key}/telemetry".encode())]
    if received_at is not None:
        headers.append(("received_at", str(received_at).encode()))
    return (
        key.encode() if key is not None else None,
        body,
        "iot.telemetry",
        0,
        offset,
        ts(kafka_ms),
        headers,
    )


def telemetry(seq: int, ts_ms: int, **metrics: float) -> dict[str, Any]:
    return {"ts": ts_ms, "seq": seq, "metrics": metrics}


def kafka_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, schemas.KAFKA_RECORD)
