from __future__ import annotations

from edge.metrics import SitesCollector
from edge.status import SiteView


def test_one_sample_per_known_value() -> None:
    views = [
        SiteView("default", "p1", True, 2.5, 7, None),
        SiteView("acme", "p2", None, None, None, None),
    ]
    families = {f.name: f for f in SitesCollector(lambda: views).collect()}
    up = families["iot_edge_site_link_up"].samples
    assert [(s.labels, s.value) for s in up] == [({"tenant": "default", "site": "p1"}, 1.0)]
    held = families["iot_edge_site_held_messages"].samples
    assert [s.value for s in held] == [7.0]
    assert [s.value for s in families["iot_edge_site_last_seen_seconds"].samples] == [2.5]
