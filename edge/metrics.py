"""The sites as Prometheus metrics (adapter: the Prometheus client)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import start_http_server
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from edge.status import SiteView


class SitesCollector(Collector):
    """Reads the views at every scrape: nothing goes stale between scrapes."""

    def __init__(self, views: Callable[[], list[SiteView]]) -> None:
        self._views = views

    def collect(self) -> Iterable[GaugeMetricFamily]:
        labels = ["tenant", "site"]
        up = GaugeMetricFamily(
            "iot_edge_site_link_up", "1 if the site's bridge is connected.", labels=labels
        )
        seen = GaugeMetricFamily(
            "iot_edge_site_last_seen_seconds",
            "Seconds since the site's last status.",
            labels=labels,
        )
        held = GaugeMetricFamily(
            "iot_edge_site_held_messages",
            "Messages held at the site (waiting for the link or a device), as last reported.",
            labels=labels,
        )
        for v in self._views():
            key = [v.tenant, v.site]
            if v.link_up is not None:
                up.add_metric(key, 1.0 if v.link_up else 0.0)
            if v.last_seen_s is not None:
                seen.add_metric(key, v.last_seen_s)
            if v.held_messages is not None:
                held.add_metric(key, float(v.held_messages))
        yield from (up, seen, held)


def serve(views: Callable[[], list[SiteView]], port: int, host: str = "127.0.0.1") -> None:
    REGISTRY.register(SitesCollector(views))
    start_http_server(port, host)
