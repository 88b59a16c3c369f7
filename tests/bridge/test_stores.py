from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bridge.config import BridgeConfig
from bridge.errors import ConfigError
from bridge.store_watch import StoreCollector
from bridge.stores import describe, is_full, parse_store_dirs

MIB = 1024 * 1024


def test_store_dirs_parse_and_refuse_what_is_malformed() -> None:
    assert parse_store_dirs("") == {}
    assert parse_store_dirs(" kafka=/v/k/data , mosquitto=/v/m ") == {
        "kafka": "/v/k/data",
        "mosquitto": "/v/m",
    }
    for bad in ("kafka", "=/x", "kafka=", "a=/x,a=/y"):
        with pytest.raises(ValueError, match=r"name=path|named twice"):
            parse_store_dirs(bad)
    with pytest.raises(ConfigError, match="store_dirs"):
        BridgeConfig.load([], environ={"IOT_STORE_DIRS": "kafka"})


def test_full_is_under_16_mib_or_2_percent_of_a_small_disk() -> None:
    assert is_full(15 * MIB, 100_000 * MIB)
    assert not is_full(17 * MIB, 100_000 * MIB)
    assert is_full(1 * MIB, 64 * MIB)  # 2 % of 64 MiB is 1.28 MiB
    assert not is_full(2 * MIB, 64 * MIB)
    assert describe("kafka", "/v/k", 4096) == "kafka: disk full (/v/k: 4,096 bytes free)"


def test_the_collector_reads_each_dir_at_scrape(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector({"here": str(tmp_path), "gone": str(tmp_path / "none")}))
    text = generate_latest(registry).decode()
    stat = os.statvfs(tmp_path)
    full = 1.0 if is_full(stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize) else 0.0
    assert f'iot_bridge_store_full{{path="{tmp_path}",store="here"}} {full}' in text
    assert f'iot_bridge_store_size_bytes{{path="{tmp_path}",store="here"}} ' in text
    assert 'store="gone"' not in text  # unreadable: left out (and logged once)
