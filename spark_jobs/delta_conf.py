"""Delta Lake's settings of a Spark session (pure): its extension, catalog and small-host tuning."""

from __future__ import annotations

DELTA_JAR_PREFIX = "delta-spark_"
CHANGE_FEED = "delta.enableChangeDataFeed"  # the table property of Delta's change data feed


def delta_conf(partitions: int) -> dict[str, str]:
    """Delta Lake's session extension and catalog, and two of its defaults cut to a small host.

    Delta's defaults rebuild every table snapshot in 50 tasks and list a table's files (VACUUM)
    in 10,000: on 2 cores that took a Delta script from 42 s to 258 s (measured,
    ../shared/docs/lakehouse-notes.md). Both follow ``shuffle_partitions`` here.
    """
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": str(partitions),
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(max(4, 2 * partitions)),
        # the retention is the job's own setting (delta_retention_hours), checked there
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        # every table the job creates keeps its change data feed (`table_changes(...)`);
        # tables made before get it at the job's start (delta_writes.enable_change_feed)
        f"spark.databricks.delta.properties.defaults.{CHANGE_FEED.removeprefix('delta.')}": "true",
    }
