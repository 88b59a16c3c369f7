"""The one error root of ``spark_jobs``."""

from __future__ import annotations


class AnalyticsError(Exception):
    """Base of every error the analytics jobs raise on purpose."""


class ConfigError(AnalyticsError):
    """A setting is missing or invalid."""


class TableMissingError(AnalyticsError):
    """A warehouse table has not been written yet."""
