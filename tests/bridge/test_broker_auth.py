"""Mosquitto's refused log-ins and publishes per user name, summed per tenant."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from bridge.broker_auth import UNKNOWN, BrokerAuthCollector, by_tenant

DOC = {
    "users": {
        "pump-1": {"auth_failures": 2, "denied_publishes": 1},
        "pump-2": {"auth_failures": 0, "denied_publishes": 3},
        "acme/pump-1": {"auth_failures": 1, "denied_publishes": 0},
        "ghost/pump-9": {"auth_failures": 5, "denied_publishes": 0},  # no such tenant
        "svc/bridge": {"auth_failures": 1, "denied_publishes": 0},
        "not a/valid/name!": {"auth_failures": 4, "denied_publishes": 0},
        "bad-counts": {"auth_failures": "x", "denied_publishes": -1},
        "odd": "not a mapping",
    },
    "other": {"auth_failures": 7, "denied_publishes": 2},
}


def test_users_are_summed_by_the_tenant_their_name_names() -> None:
    got = by_tenant(DOC, {"default", "acme"})
    assert got["auth_failures"] == {"default": 2, "acme": 1, "svc": 1, UNKNOWN: 5 + 4 + 7}
    assert got["denied_publishes"] == {"default": 4, UNKNOWN: 2}


def test_a_tenant_the_bridge_does_not_know_is_unknown() -> None:
    assert by_tenant(DOC, {"default"})["auth_failures"]["acme"] == 0


def test_an_empty_or_odd_document_counts_nothing() -> None:
    assert by_tenant({}, {"default"}) == {"auth_failures": {}, "denied_publishes": {}}
    assert by_tenant({"users": [1, 2]}, {"default"})["auth_failures"] == {}


def test_the_collector_reads_the_file_at_each_scrape(tmp_path: Path) -> None:
    path = tmp_path / "auth_metrics.json"
    registry = CollectorRegistry()
    registry.register(BrokerAuthCollector(path, lambda: {"default", "acme"}))
    assert b"iot_mqtt_auth_failures_total{" not in generate_latest(registry)  # no file yet
    path.write_text(json.dumps(DOC))
    text = generate_latest(registry).decode()
    assert 'iot_mqtt_auth_failures_total{tenant="acme"} 1.0' in text
    assert 'iot_mqtt_denied_publishes_total{tenant="default"} 4.0' in text
    path.write_text("{half a file")
    assert b"iot_mqtt_auth_failures_total{" not in generate_latest(registry)
