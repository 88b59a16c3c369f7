"""Mosquitto's refused log-ins and publishes per tenant, for the bridge's ``/metrics``.

The Mosquitto plugin ``mosquitto/plugins/iot_auth_metrics.c`` counts them per MQTT user name
and rewrites a JSON file every few seconds (docs/security.md, "Metrics per tenant"); at each
scrape the collector reads it and sums the users' counts by tenant. The tenant comes from the
user name's registry convention (``pump-1``: default tenant, ``acme/pump-1``: acme,
``svc/...``: a service account, label ``svc``); a user name that names no tenant the bridge
knows (an attacker's guess, a deleted tenant) counts as ``unknown``, so the label set stays
bounded by the registry, not by what clients send.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from registry.errors import RegistryError
from registry.topics import parse_username

__all__ = ["UNKNOWN", "BrokerAuthCollector", "by_tenant"]

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
SERVICE = "svc"
FIELDS = ("auth_failures", "denied_publishes")


def _tenant_of(username: str, known: Collection[str]) -> str:
    try:
        who = parse_username(username)
    except (RegistryError, ValueError):
        return UNKNOWN
    if who.kind == "account":
        return SERVICE
    return who.tenant if who.tenant is not None and who.tenant in known else UNKNOWN


def by_tenant(doc: Mapping[str, Any], known: Collection[str]) -> dict[str, Counter[str]]:
    """``{field: Counter(tenant -> count)}`` of the plugin's document ``doc``."""
    out: dict[str, Counter[str]] = {f: Counter() for f in FIELDS}
    users = doc.get("users")
    rows: list[tuple[str, Any]] = list(users.items()) if isinstance(users, Mapping) else []
    rows.append(("", doc.get("other")))  # the plugin's overflow bucket: unknown
    for username, counts in rows:
        if not isinstance(counts, Mapping):
            continue
        tenant = _tenant_of(username, known) if username else UNKNOWN
        for f in FIELDS:
            value = counts.get(f)
            if isinstance(value, int) and value > 0:
                out[f][tenant] += value
    return out


class BrokerAuthCollector(Collector):
    """``iot_mqtt_auth_failures_total`` and ``iot_mqtt_denied_publishes_total`` by tenant."""

    def __init__(self, path: Path, known_tenants: Callable[[], Collection[str]]) -> None:
        self.path = path
        self.known_tenants = known_tenants

    def _read(self) -> Mapping[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("cannot read Mosquitto's auth counts %s: %s", self.path, exc)
            return {}
        return doc if isinstance(doc, Mapping) else {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = by_tenant(self._read(), self.known_tenants())
        for field, help_text in (
            ("auth_failures", "MQTT log-ins Mosquitto refused, by the user name's tenant"),
            ("denied_publishes", "PUBLISHes Mosquitto refused (ACL), by the user name's tenant"),
        ):
            family = CounterMetricFamily(f"iot_mqtt_{field}", help_text, labels=["tenant"])
            for tenant, n in sorted(counts[field].items()):
                family.add_metric([tenant], n)
            yield family
