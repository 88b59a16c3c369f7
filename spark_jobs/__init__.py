"""Fleet analytics on Spark: Structured Streaming from Kafka into Parquet tables analysts query."""

__version__ = "0.1.0"
