"""The data dirs' free space on the bridge's /metrics (adapter: the file system's statvfs at
each scrape): ``iot_bridge_store_free_bytes``, ``iot_bridge_store_size_bytes`` and
``iot_bridge_store_full`` by store (``bridge.stores``); a dir that cannot be read counts as
not full and is logged once."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bridge.stores import describe, is_full

log = logging.getLogger(__name__)


class StoreCollector(Collector):
    """Free space of each named data dir, read when /metrics is scraped."""

    def __init__(self, dirs: Mapping[str, str]) -> None:
        self.dirs = dict(dirs)
        self._unreadable: set[str] = set()
        self._full: set[str] = set()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        free = GaugeMetricFamily(
            "iot_bridge_store_free_bytes",
            "Free bytes of a watched data dir's file system (store_dirs)",
            labels=["store", "path"],
        )
        size = GaugeMetricFamily(
            "iot_bridge_store_size_bytes",
            "Size in bytes of a watched data dir's file system (store_dirs)",
            labels=["store", "path"],
        )
        full = GaugeMetricFamily(
            "iot_bridge_store_full",
            "1 while a watched data dir's disk is full (under 16 MiB or 2 % free): Kafka stops, "
            "Mosquitto's saves fail",
            labels=["store", "path"],
        )
        for name, path in sorted(self.dirs.items()):
            try:
                stat = os.statvfs(path)
            except OSError as exc:
                if name not in self._unreadable:
                    self._unreadable.add(name)
                    log.warning("store %s: cannot read %s: %s", name, path, exc)
                continue
            self._unreadable.discard(name)
            avail = stat.f_bavail * stat.f_frsize
            total = stat.f_blocks * stat.f_frsize
            now_full = is_full(avail, total)
            if now_full and name not in self._full:
                log.error("%s", describe(name, path, avail))
            elif not now_full and name in self._full:
                log.info("store %s: space back (%s: %d bytes free)", name, path, avail)
            self._full = (self._full | {name}) if now_full else (self._full - {name})
            free.add_metric([name, path], float(avail))
            size.add_metric([name, path], float(total))
            full.add_metric([name, path], 1.0 if now_full else 0.0)
        yield free
        yield size
        yield full
