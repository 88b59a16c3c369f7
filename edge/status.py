"""A site's status: what the site reports and what the centre makes of it (pure).

At the site, the supervisor reads the broker's ``$SYS`` counters and the bridge's link-state
notification and publishes a :class:`SiteStatus` (retained) on ``{root}sites/{site}/status``;
the bridge carries it to the centre. The link state itself comes from the bridge's own
notification on ``{root}sites/{site}/state`` ("1" on connect, "0" as its will): the centre
sees a dead link 1.5 x keepalive after the last packet, without the site's help.

"Held" messages = Mosquitto's stored messages minus retained ones: what waits for the bridge
(and for offline local devices' sessions, e.g. commands not yet fetched).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

STORED = "$SYS/broker/store/messages/count"
STORED_BYTES = "$SYS/broker/store/messages/bytes"
RETAINED = "$SYS/broker/retained messages/count"
CLIENTS = "$SYS/broker/clients/connected"
SYS_TOPICS = (STORED, STORED_BYTES, RETAINED, CLIENTS)


@dataclass(frozen=True)
class SiteStatus:
    site: str
    tenant: str
    at_ms: int
    link: str  # "up", "down" or "unknown"
    broker_running: bool
    broker_restarts: int
    held_messages: int | None
    held_bytes: int | None
    clients: int | None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> SiteStatus:
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError("status is not an object")
        return cls(**body)


def _int(values: Mapping[str, str], topic: str) -> int | None:
    try:
        return int(values[topic])
    except (KeyError, ValueError):
        return None


def link_of(state_payload: str | None) -> str:
    """The bridge notification's payload as a link state."""
    return {"1": "up", "0": "down"}.get((state_payload or "").strip(), "unknown")


def site_status(
    site: str,
    tenant: str,
    at_ms: int,
    *,
    sys_values: Mapping[str, str],
    state_payload: str | None,
    broker_running: bool,
    broker_restarts: int,
) -> SiteStatus:
    stored, retained = _int(sys_values, STORED), _int(sys_values, RETAINED)
    held = None if stored is None else max(0, stored - (retained or 0))
    return SiteStatus(
        site=site,
        tenant=tenant,
        at_ms=at_ms,
        link=link_of(state_payload) if broker_running else "down",
        broker_running=broker_running,
        broker_restarts=broker_restarts,
        held_messages=held,
        held_bytes=_int(sys_values, STORED_BYTES),
        clients=_int(sys_values, CLIENTS),
    )


@dataclass(frozen=True)
class SiteView:
    """One site as the centre sees it."""

    tenant: str
    site: str
    link_up: bool | None  # None: the site never announced itself
    last_seen_s: float | None  # since its last status (site clock vs ours: skew counts)
    held_messages: int | None
    status: SiteStatus | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "site": self.site,
            "link": {True: "up", False: "down", None: "unknown"}[self.link_up],
            "last_seen_s": None if self.last_seen_s is None else round(self.last_seen_s, 1),
            "held_messages": self.held_messages,
        }


def parse_site_topic(topic: str) -> tuple[str, str, str] | None:
    """(tenant, site, leaf) of ``sites/{s}/{leaf}`` or ``tenants/{t}/sites/{s}/{leaf}``."""
    parts = topic.split("/")
    if len(parts) == 3 and parts[0] == "sites":
        return "default", parts[1], parts[2]
    if len(parts) == 5 and parts[0] == "tenants" and parts[2] == "sites":
        return parts[1], parts[3], parts[4]
    return None


def site_views(retained: Mapping[str, bytes], now_ms: int) -> list[SiteView]:
    """Views of every site from the centre's retained state/status messages (topic->payload)."""
    states: dict[tuple[str, str], str] = {}
    statuses: dict[tuple[str, str], SiteStatus] = {}
    for topic, payload in retained.items():
        parsed = parse_site_topic(topic)
        if parsed is None:
            continue
        tenant, site, leaf = parsed
        if leaf == "state":
            states[(tenant, site)] = payload.decode(errors="replace")
        elif leaf == "status":
            try:
                statuses[(tenant, site)] = SiteStatus.from_json(payload)
            except (ValueError, TypeError):
                continue
    views = []
    for key in sorted(set(states) | set(statuses)):
        link = link_of(states.get(key))
        status = statuses.get(key)
        views.append(
            SiteView(
                tenant=key[0],
                site=key[1],
                link_up=None if link == "unknown" else link == "up",
                last_seen_s=None if status is None else max(0.0, (now_ms - status.at_ms) / 1000),
                held_messages=None if status is None else status.held_messages,
                status=status,
            )
        )
    return views
