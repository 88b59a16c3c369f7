from __future__ import annotations

from edge import status
from edge.status import SiteStatus


def _sys(stored: int, retained: int) -> dict[str, str]:
    return {status.STORED: str(stored), status.RETAINED: str(retained), status.CLIENTS: "3"}


def test_held_is_stored_minus_retained() -> None:
    s = status.site_status(
        "p1", "default", 1000, sys_values=_sys(2055, 55), state_payload="1",
        broker_running=True, broker_restarts=0,
    )  # fmt: skip
    assert (s.held_messages, s.link, s.clients) == (2000, "up", 3)


def test_unknown_and_stopped() -> None:
    s = status.site_status(
        "p1", "default", 1000, sys_values={}, state_payload=None, broker_running=True,
        broker_restarts=0,
    )  # fmt: skip
    assert (s.held_messages, s.link) == (None, "unknown")
    stopped = status.site_status(
        "p1", "default", 1000, sys_values=_sys(1, 0), state_payload="1", broker_running=False,
        broker_restarts=2,
    )  # fmt: skip
    assert stopped.link == "down"


def test_topics_of_sites() -> None:
    assert status.parse_site_topic("sites/p1/state") == ("default", "p1", "state")
    assert status.parse_site_topic("tenants/acme/sites/p1/status") == ("acme", "p1", "status")
    assert status.parse_site_topic("devices/p1/telemetry") is None


def test_views_at_the_centre() -> None:
    report = SiteStatus("p1", "default", 10_000, "up", True, 0, 42, 1000, 2)
    retained = {
        "sites/p1/state": b"0",
        "sites/p1/status": report.to_json(),
        "tenants/acme/sites/p2/state": b"1",
        "tenants/acme/sites/p3/status": b"not json",
    }
    views = {v.site: v for v in status.site_views(retained, now_ms=25_000)}
    assert views["p1"].as_dict() == {
        "tenant": "default", "site": "p1", "link": "down", "last_seen_s": 15.0,
        "held_messages": 42,
    }  # fmt: skip
    assert views["p2"].link_up is True
    assert views["p2"].last_seen_s is None
    assert "p3" not in views  # a status that does not decode names nothing
    assert SiteStatus.from_json(report.to_json()) == report
