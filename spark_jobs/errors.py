"""The one error root of ``spark_jobs``."""

from __future__ import annotations


class AnalyticsError(Exception):
    """Base of every error the analytics jobs raise on purpose."""


class ConfigError(AnalyticsError):
    """A setting is missing or invalid."""


class TableMissingError(AnalyticsError):
    """A warehouse table has not been written yet."""


class QueryError(AnalyticsError):
    """A query Spark refused: a table that does not exist, a version or time before the
    table's history, bad SQL (its first line, without the JVM's stack trace)."""
