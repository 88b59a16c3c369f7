"""Row retention per table and tenant, and the files-per-day bound (pure; no Spark)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_jobs.config import AnalyticsConfig
from spark_jobs.delta_writes import Upkeep
from spark_jobs.errors import ConfigError
from spark_jobs.retention import Retention, over_bound, parse_days, parse_tenants

NOW = dt.datetime(2026, 11, 29, 4, 0, 0, tzinfo=dt.UTC)
Q = "delta.`/w/device_minute`"


def test_days_and_tenant_overrides_parse_with_or_without_the_d() -> None:
    assert parse_days(["device_minute=90", "rejects=7d", "anomalies=0"]) == {
        "device_minute": 90,
        "rejects": 7,
        "anomalies": 0,
    }
    assert parse_tenants(["acme:device_minute=30d", "acme:rejects=0", "b-2:anomalies=5"]) == {
        "acme": {"device_minute": 30, "rejects": 0},
        "b-2": {"anomalies": 5},
    }


@pytest.mark.parametrize(
    ("days", "tenants", "message"),
    [
        (["device_minute"], [], "is not table=days"),
        (["device_minute=-1"], [], "is not table=days"),
        (["device_status=30"], [], "a table that ages is one of"),
        (["nosuch=3"], [], "a table that ages is one of"),
        ([], ["device_minute=30"], "is not tenant:table=days"),
        ([], ["Acme:rejects=3"], "is not tenant:table=days"),  # not a tenant id
        ([], ["acme:rejects=3;DROP"], "is not tenant:table=days"),
        ([], ["acme:device_status=3"], "a table that ages is one of"),
    ],
)
def test_bad_retention_items_are_one_clear_error(
    days: list[str], tenants: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Retention.parse(days, tenants)


def test_the_config_reads_both_settings_from_the_environment_and_checks_them() -> None:
    env = {
        "IOT_RETENTION_DAYS": "device_minute=10,rejects=3d",
        "IOT_RETENTION_TENANTS": "acme:device_minute=2, acme:rejects=0",
        "IOT_DELTA_MAX_FILES_PER_DAY": "50",
    }
    cfg = AnalyticsConfig.load(env)
    assert cfg.retention_policy() == Retention(
        {"device_minute": 10, "rejects": 3}, {"acme": {"device_minute": 2, "rejects": 0}}
    )
    assert cfg.delta_max_files_per_day == 50
    assert AnalyticsConfig.load({}).retention_policy().days == {
        "device_minute": 90,
        "fleet_minute": 365,
        "anomalies": 180,
        "rejects": 30,
    }
    with pytest.raises(ConfigError, match="retention_tenants: 'acme'"):
        AnalyticsConfig.load({"IOT_RETENTION_TENANTS": "acme"})
    with pytest.raises(ConfigError, match="delta_max_files_per_day"):
        AnalyticsConfig.load({"IOT_DELTA_MAX_FILES_PER_DAY": "-1"})


def test_one_delete_for_the_other_tenants_and_one_per_tenant_that_ages_differently() -> None:
    rows = Retention({"device_minute": 90}, {"acme": {"device_minute": 30}, "zed": {"rejects": 1}})
    assert rows.delete_statements("device_minute", Q, NOW) == [
        f"DELETE FROM {Q} WHERE `tenant` NOT IN ('acme') "
        "AND `window_start` < TIMESTAMP '2026-08-31 04:00:00+00:00'",
        f"DELETE FROM {Q} WHERE `tenant` = 'acme' "
        "AND `window_start` < TIMESTAMP '2026-10-30 04:00:00+00:00'",
    ]
    # no override for this table: one statement, on its own time column
    assert Retention({"rejects": 1}, {"acme": {"device_minute": 3}}).delete_statements(
        "rejects", "r", NOW
    ) == ["DELETE FROM r WHERE `kafka_timestamp` < TIMESTAMP '2026-11-28 04:00:00+00:00'"]


def test_forever_is_no_delete_for_the_table_or_for_the_tenant() -> None:
    forever_but_acme = Retention({}, {"acme": {"anomalies": 7}})
    assert forever_but_acme.delete_statements("anomalies", "a", NOW) == [
        "DELETE FROM a WHERE `tenant` = 'acme' "
        "AND `event_time` < TIMESTAMP '2026-11-22 04:00:00+00:00'"
    ]
    acme_forever = Retention({"anomalies": 7}, {"acme": {"anomalies": 0}})
    assert acme_forever.delete_statements("anomalies", "a", NOW) == [
        "DELETE FROM a WHERE `tenant` NOT IN ('acme') "
        "AND `event_time` < TIMESTAMP '2026-11-22 04:00:00+00:00'"
    ]
    assert Retention({"anomalies": 0}).delete_statements("anomalies", "a", NOW) == []
    assert Retention({"rejects": 1}).delete_statements("device_status", "s", NOW) == []
    # the cut-off is UTC whatever zone `now` is in
    cet = NOW.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert Retention({"rejects": 1}).delete_statements("rejects", "r", cet) == [
        "DELETE FROM r WHERE `kafka_timestamp` < TIMESTAMP '2026-11-28 04:00:00+00:00'"
    ]


def test_upkeep_deletes_before_it_compacts_and_vacuums() -> None:
    upkeep = Upkeep(60, 24, rows=Retention({"rejects": 2}))
    assert upkeep.statements(Path("/w/rejects"), NOW) == [
        "DELETE FROM delta.`/w/rejects` WHERE `kafka_timestamp` < "
        "TIMESTAMP '2026-11-27 04:00:00+00:00'",
        "OPTIMIZE delta.`/w/rejects`",
        "VACUUM delta.`/w/rejects` RETAIN 24 HOURS",
    ]


def test_files_over_the_day_bound_are_counted_from_the_log_at_most_every_check(
    tmp_path: Path,
) -> None:
    assert not over_bound(5, 0)  # 0: no bound
    assert not over_bound(5, 5)
    assert over_bound(6, 5)
    table = tmp_path / "device_minute"
    now = [0.0]
    upkeep = Upkeep(0, 168, max_files_per_day=2, bound_check_s=60, clock=lambda: now[0])
    assert not upkeep.over_bound(table)  # no table yet
    for batch in range(3):
        write_deltalake(str(table), pa.table({"d": [batch]}), mode="append")
    assert not upkeep.over_bound(table)  # counted 0 s ago (no table then): not again yet
    now[0] = 60.0
    assert upkeep.over_bound(table)  # 3 files today > 2
    assert not Upkeep(0, 168, max_files_per_day=3).over_bound(table)
    assert not Upkeep(0, 168, max_files_per_day=0).over_bound(table)
