"""Row retention per table and per tenant, and the bound on a table's files per day (pure).

Settings (:class:`spark_jobs.config.AnalyticsConfig`): ``retention_days`` gives each table's
days of rows (``device_minute=90,...``; 0 or a table left out: forever), ``retention_tenants``
overrides it for one tenant's rows (``acme:device_minute=30,...``). The streaming job's upkeep
runs the ``DELETE`` statements :func:`delete_statements` renders, before its OPTIMIZE and
VACUUM; VACUUM frees the deleted rows' files once they are older than ``delta_retention_hours``
(time travel can read them until then). ``device_status`` is a snapshot of every device, never
aged: it has no time column here and so no retention.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_jobs.errors import ConfigError
from spark_jobs.tenants import TENANT_COLUMN, TENANT_ID

# the event time a row ages by, per table that can age
TIME_COLUMNS: Mapping[str, str] = {
    "device_minute": "window_start",
    "fleet_minute": "window_start",
    "anomalies": "event_time",
    "rejects": "kafka_timestamp",
}
DEFAULT_DAYS = ("device_minute=90", "fleet_minute=365", "anomalies=180", "rejects=30")

_DAYS = r"(\d{1,5})d?"
_TABLE_DAYS_RE = re.compile(rf"^([a-z_]+)={_DAYS}$")
_TENANT_DAYS_RE = re.compile(rf"^({TENANT_ID}):([a-z_]+)={_DAYS}$")


def _table(name: str, setting: str, item: str) -> str:
    if name not in TIME_COLUMNS:
        raise ConfigError(
            f"{setting}: {item!r}: a table that ages is one of {', '.join(TIME_COLUMNS)}"
        )
    return name


def parse_days(items: Sequence[str]) -> dict[str, int]:
    """``table=N`` (or ``table=Nd``) items -> table: days (0: forever)."""
    days: dict[str, int] = {}
    for item in items:
        match = _TABLE_DAYS_RE.match(item.strip())
        if match is None:
            raise ConfigError(f"retention_days: {item!r} is not table=days (e.g. rejects=30)")
        days[_table(match[1], "retention_days", item)] = int(match[2])
    return days


def parse_tenants(items: Sequence[str]) -> dict[str, dict[str, int]]:
    """``tenant:table=N`` items -> tenant: {table: days} (0: that tenant's rows forever)."""
    out: dict[str, dict[str, int]] = {}
    for item in items:
        match = _TENANT_DAYS_RE.match(item.strip())
        if match is None:
            raise ConfigError(
                f"retention_tenants: {item!r} is not tenant:table=days (e.g. acme:device_minute=30)"
            )
        table = _table(match[2], "retention_tenants", item)
        out.setdefault(match[1], {})[table] = int(match[3])
    return out


@dataclass(frozen=True)
class Retention:
    """Days of rows per table (absent or 0: forever), and per tenant where it differs."""

    days: Mapping[str, int] = field(default_factory=dict)
    tenants: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, days: Sequence[str], tenants: Sequence[str] = ()) -> Retention:
        return cls(parse_days(days), parse_tenants(tenants))

    def delete_statements(self, table: str, quoted: str, now: dt.datetime) -> list[str]:
        """The DELETEs that drop the table's rows past their limit at ``now`` (UTC).

        One statement for the tenants without an override (if the table ages), one per tenant
        whose override ages its rows. ``quoted`` is the table as SQL names it
        (``delta.`/w/rejects```). The tenant is the partition column, so each statement only
        reads its tenants' files; the cut-off is a literal, so Delta skips files by their
        time column's statistics.
        """
        column = TIME_COLUMNS.get(table)
        if column is None:
            return []
        overrides = {t: d[table] for t, d in sorted(self.tenants.items()) if table in d}
        out = []
        if default := self.days.get(table, 0):
            where = f"`{column}` < {_cutoff(now, default)}"
            if overrides:
                others = ", ".join(f"'{t}'" for t in overrides)
                where = f"`{TENANT_COLUMN}` NOT IN ({others}) AND {where}"
            out.append(f"DELETE FROM {quoted} WHERE {where}")  # noqa: S608 (names checked)
        for tenant, days in overrides.items():
            if days:
                # tenant: TENANT_ID's letters only (parse_tenants); column: ours
                out.append(
                    f"DELETE FROM {quoted} WHERE `{TENANT_COLUMN}` = '{tenant}' "  # noqa: S608
                    f"AND `{column}` < {_cutoff(now, days)}"
                )
        return out


def _cutoff(now: dt.datetime, days: int) -> str:
    """A Spark timestamp literal ``days`` before ``now``, in UTC whatever the session's zone."""
    cut = now.astimezone(dt.UTC) - dt.timedelta(days=days)
    return f"TIMESTAMP '{cut.strftime('%Y-%m-%d %H:%M:%S')}+00:00'"


def over_bound(files_today: int, max_per_day: int) -> bool:
    """The table wrote more files today than ``max_per_day`` allows (0: no bound)."""
    return max_per_day > 0 and files_today > max_per_day
