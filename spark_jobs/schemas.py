"""Explicit schemas: the Kafka record values we read, and the names of the tables we write.

Record value contract (../shared/docs/design.md): telemetry is JSON
``{ts (epoch ms, device clock), seq, metrics: {name: number}, tags?}``, key = device id,
headers ``mqtt_topic``, ``received_at`` (epoch ms, bridge clock), ``qos``. Presence is
``{online: bool, at: epoch ms}``, key = device id.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import types as T  # noqa: N812 (the PySpark idiom)

TELEMETRY_VALUE: Final = T.StructType(
    [
        T.StructField("ts", T.LongType()),
        T.StructField("seq", T.LongType()),
        T.StructField("metrics", T.MapType(T.StringType(), T.DoubleType())),
        T.StructField("tags", T.MapType(T.StringType(), T.StringType())),
    ]
)

PRESENCE_VALUE: Final = T.StructType(
    [
        T.StructField("online", T.BooleanType()),
        T.StructField("at", T.LongType()),
    ]
)

# The columns the Kafka source yields (with includeHeaders=true); tests build frames like it.
KAFKA_RECORD: Final = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField(
            "headers",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("key", T.StringType()),
                        T.StructField("value", T.BinaryType()),
                    ]
                )
            ),
        ),
    ]
)

# Why a record was rejected (the ``reason`` column of the ``rejects`` table).
REASON_NO_KEY: Final = "no_key"
REASON_NOT_JSON: Final = "not_json"
REASON_NO_TS: Final = "no_ts"  # missing, or outside the years 1970..9999
REASON_NO_SEQ: Final = "no_seq"
REASON_NO_METRICS: Final = "no_metrics"

# Table names (folders under the warehouse dir; also the SQL view names).
DEVICE_MINUTE: Final = "device_minute"
FLEET_MINUTE: Final = "fleet_minute"
ANOMALIES: Final = "anomalies"
DEVICE_STATUS: Final = "device_status"
REJECTS: Final = "rejects"
TABLES: Final = (DEVICE_MINUTE, FLEET_MINUTE, ANOMALIES, DEVICE_STATUS, REJECTS)
