"""Pure transforms, ``DataFrame -> DataFrame``: no session, no I/O, batch or streaming alike.

The streaming job (:mod:`spark_jobs.stream`) wires them between the Kafka source and the
Parquet sinks; the tests feed them small hand-built frames.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (the PySpark idiom)

from spark_jobs import schemas, tenants

MINUTE = "1 minute"
# Epoch-ms bounds Spark's timestamps hold (year 1..9999); outside them timestamp_millis fails.
MIN_TS_MS = 0
MAX_TS_MS = 253_402_300_799_999
PERCENTILE_ACCURACY = 10000


def _header(name: str) -> Column:
    """The value of Kafka header ``name`` as a string (null when absent)."""
    found = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(name))
    return F.try_element_at(found, F.lit(1))["value"].cast("string")


def tenant_of() -> Column:
    """A Kafka record's tenant: its ``tenant`` header, which the bridge stamps on every record
    of a tenant's own topics; none (the default tenant's ``iot.telemetry``) = ``default``."""
    return F.coalesce(_header(tenants.TENANT_HEADER), F.lit(tenants.DEFAULT_TENANT))


def parse_telemetry(raw: DataFrame) -> DataFrame:
    """Kafka records (key, value, headers, ...) -> one row per record with a ``reason``.

    ``reason`` is null for a record that follows the contract, else one of the ``REASON_*``
    codes of :mod:`spark_jobs.schemas`: such rows are kept (and counted), never raised.
    Spark 4 runs ANSI SQL: every conversion of untrusted input here is a ``try_`` one or is
    range-checked first, so a bad record yields a reason, never a failed query.
    ``received_at`` is the bridge's header, or the Kafka timestamp when the header is missing.
    ``tenant`` is :func:`tenant_of`: a device is (tenant, device_id) everywhere below.
    """
    text = F.col("value").cast("string")
    parsed = F.from_json(text, schemas.TELEMETRY_VALUE)
    looks_json = F.get_json_object(text, "$").isNotNull() & F.ltrim(text).startswith("{")
    received_ms = _header("received_at").try_cast("long")
    received_ms = F.when(received_ms.between(MIN_TS_MS, MAX_TS_MS), received_ms)
    reason = (
        F.when(F.col("key").isNull() | (F.length(F.col("key")) == 0), schemas.REASON_NO_KEY)
        .when(text.isNull() | ~looks_json, schemas.REASON_NOT_JSON)
        .when(
            ~F.coalesce(F.col("_p.ts").between(MIN_TS_MS, MAX_TS_MS), F.lit(False)),
            schemas.REASON_NO_TS,
        )
        .when(F.col("_p.seq").isNull(), schemas.REASON_NO_SEQ)
        .when(F.col("_p.metrics").isNull(), schemas.REASON_NO_METRICS)
    )
    return (
        raw.withColumn("_p", parsed)
        .withColumn("_recv", received_ms)
        .select(
            tenant_of().alias(tenants.TENANT_COLUMN),
            F.col("key").cast("string").alias("device_id"),
            F.col("_p.ts").alias("ts"),
            F.col("_p.seq").alias("seq"),
            F.col("_p.metrics").alias("metrics"),
            F.timestamp_millis(
                F.when(F.col("_p.ts").between(MIN_TS_MS, MAX_TS_MS), F.col("_p.ts"))
            ).alias("event_time"),
            F.coalesce(F.timestamp_millis(F.col("_recv")), F.col("timestamp")).alias("received_at"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            F.col("timestamp").alias("kafka_timestamp"),
            reason.alias("reason"),
            text.alias("raw_value"),
        )
    )


def valid_telemetry(parsed: DataFrame) -> DataFrame:
    """The rows of :func:`parse_telemetry` that follow the contract."""
    return parsed.where(F.col("reason").isNull()).drop("reason", "raw_value")


def rejects(parsed: DataFrame, max_value_chars: int = 2000) -> DataFrame:
    """The rows of :func:`parse_telemetry` that do not parse, with why (the ``rejects`` table)."""
    return parsed.where(F.col("reason").isNotNull()).select(
        tenants.TENANT_COLUMN,
        "kafka_timestamp",
        "kafka_partition",
        "kafka_offset",
        "device_id",
        "reason",
        F.substring(F.col("raw_value"), 1, max_value_chars).alias("raw_value"),
    )


def _metric_aggs(metrics: Sequence[str]) -> list[Column]:
    out: list[Column] = []
    for m in metrics:
        value = F.col("metrics")[m]
        out += [
            F.min(value).alias(f"{m}_min"),
            F.avg(value).alias(f"{m}_avg"),
            F.max(value).alias(f"{m}_max"),
            F.stddev_samp(value).alias(f"{m}_std"),
        ]
    return out


def device_minute(valid: DataFrame, metrics: Sequence[str]) -> DataFrame:
    """Per device and event-time minute: counts, seq accounting, min/avg/max/std per metric.

    - ``messages``: records received (duplicates included);
    - ``distinct_seq``: distinct ``seq`` values; ``duplicates`` = messages - distinct_seq
      (the bridge's at-least-once redelivery shows up here);
    - ``first_seq``/``last_seq``: lowest/highest seq of the minute; ``missing_seq``: seq values
      between them that never arrived (gaps inside the minute; a gap that straddles two
      minutes is not counted here, the report's per-device loss rate counts it).
    Apply the event-time watermark before calling this in a streaming query.
    """
    w = F.window("event_time", MINUTE)
    agg = valid.groupBy(w.alias("w"), F.col(tenants.TENANT_COLUMN), F.col("device_id")).agg(
        F.count(F.lit(1)).alias("messages"),
        F.size(F.collect_set("seq")).cast("long").alias("distinct_seq"),
        F.min("seq").alias("first_seq"),
        F.max("seq").alias("last_seq"),
        F.min("event_time").alias("first_event_time"),
        F.max("event_time").alias("last_event_time"),
        F.max("received_at").alias("last_received_at"),
        *_metric_aggs(metrics),
    )
    metric_cols = [f"{m}_{s}" for m in metrics for s in ("min", "avg", "max", "std")]
    return agg.select(
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        tenants.TENANT_COLUMN,
        "device_id",
        "messages",
        "distinct_seq",
        "first_seq",
        "last_seq",
        (F.col("last_seq") - F.col("first_seq") + 1 - F.col("distinct_seq")).alias("missing_seq"),
        (F.col("messages") - F.col("distinct_seq")).alias("duplicates"),
        "first_event_time",
        "last_event_time",
        "last_received_at",
        *metric_cols,
    )


def fleet_minute(valid: DataFrame, metrics: Sequence[str]) -> DataFrame:
    """Per tenant and event-time minute over its fleet: active devices, messages, late
    messages, p50/p95.

    A message is *late* when the bridge received it after its minute had ended (still inside
    the watermark, so it is counted; records behind the watermark are dropped by Spark and
    reported in the job's progress as ``numRowsDroppedByWatermark``). Percentiles are Spark's
    ``percentile_approx`` with accuracy 10000 (exact for fewer values than that).
    """
    w = F.window("event_time", MINUTE)
    aggs: list[Column] = [
        F.size(F.collect_set("device_id")).cast("long").alias("active_devices"),
        F.count(F.lit(1)).alias("messages"),
        F.sum(F.when(F.col("received_at") >= F.col("w.end"), 1).otherwise(0))
        .cast("long")
        .alias("late_messages"),
    ]
    aggs += [
        F.percentile_approx(
            F.col("metrics")[m], F.array(F.lit(0.5), F.lit(0.95)), PERCENTILE_ACCURACY
        ).alias(f"_{m}_pct")
        for m in metrics
    ]
    agg = valid.withColumn("w", w).groupBy("w", tenants.TENANT_COLUMN).agg(*aggs)
    cols: list[Column] = []
    for m in metrics:
        cols += [
            F.col(f"_{m}_pct")[0].alias(f"{m}_p50"),
            F.col(f"_{m}_pct")[1].alias(f"{m}_p95"),
        ]
    return agg.select(
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        tenants.TENANT_COLUMN,
        "active_devices",
        "messages",
        "late_messages",
        *cols,
    )


def parse_presence(raw: DataFrame) -> DataFrame:
    """Kafka presence records -> (tenant, device_id, online, presence_at); unparsable rows
    dropped."""
    p = F.from_json(F.col("value").cast("string"), schemas.PRESENCE_VALUE)
    return (
        raw.withColumn("_p", p)
        .select(
            tenant_of().alias(tenants.TENANT_COLUMN),
            F.col("key").cast("string").alias("device_id"),
            F.col("_p.online").alias("online"),
            F.timestamp_millis(F.col("_p.at")).alias("presence_at"),
        )
        .where(
            F.col("device_id").isNotNull()
            & F.col("online").isNotNull()
            & F.col("presence_at").isNotNull()
        )
    )


def device_facts(valid: DataFrame, presence: DataFrame) -> DataFrame:
    """Per (tenant, device): last telemetry seen (bridge clock), last seq, messages, latest
    presence."""
    seen = valid.select(
        tenants.TENANT_COLUMN,
        "device_id",
        F.col("received_at"),
        F.col("seq"),
        F.col("event_time"),
        F.lit(None).cast("boolean").alias("online"),
        F.lit(None).cast("timestamp").alias("presence_at"),
        F.lit(1).alias("is_telemetry"),
    )
    said = presence.select(
        tenants.TENANT_COLUMN,
        "device_id",
        F.lit(None).cast("timestamp").alias("received_at"),
        F.lit(None).cast("long").alias("seq"),
        F.lit(None).cast("timestamp").alias("event_time"),
        "online",
        "presence_at",
        F.lit(0).alias("is_telemetry"),
    )
    return (
        seen.unionByName(said)
        .groupBy(tenants.TENANT_COLUMN, "device_id")
        .agg(
            F.max("received_at").alias("last_seen"),
            F.max_by("seq", "received_at").alias("last_seq"),
            F.max("event_time").alias("last_event_time"),
            F.sum("is_telemetry").cast("long").alias("messages"),
            F.max_by("online", "presence_at").alias("presence_online"),
            F.max("presence_at").alias("presence_at"),
        )
    )


def device_status(facts: DataFrame, as_of: Column, silence_s: float) -> DataFrame:
    """Online/offline per device at ``as_of`` (a timestamp column or literal).

    offline/``presence``: the device's last presence record says offline and is not older
    than its last telemetry; offline/``silence``: nothing received for ``silence_s``;
    otherwise online (``telemetry``, or ``presence`` when only a presence record is known).
    """
    silent = F.col("last_seen").isNull() | (
        F.col("last_seen") < as_of - F.make_interval(secs=F.lit(silence_s))
    )
    said_offline = (F.col("presence_online") == F.lit(False)) & (
        F.col("last_seen").isNull() | (F.col("presence_at") >= F.col("last_seen"))
    )
    presence_fresh = (F.col("presence_online") == F.lit(True)) & (
        F.col("presence_at") >= as_of - F.make_interval(secs=F.lit(silence_s))
    )
    online = F.when(said_offline, F.lit(False)).when(~silent, F.lit(True))
    online = online.when(presence_fresh, F.lit(True)).otherwise(F.lit(False))
    reason = (
        F.when(said_offline, F.lit("presence"))
        .when(~silent, F.lit("telemetry"))
        .when(presence_fresh, F.lit("presence"))
        .otherwise(F.lit("silence"))
    )
    return facts.select(
        tenants.TENANT_COLUMN,
        "device_id",
        online.alias("online"),
        reason.alias("reason"),
        "last_seen",
        "last_seq",
        "last_event_time",
        "messages",
        "presence_online",
        "presence_at",
        as_of.alias("as_of"),
    )
