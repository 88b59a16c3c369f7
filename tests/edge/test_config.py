from __future__ import annotations

from typing import Any

import pytest

from edge.config import EdgeConfig
from edge.errors import ConfigError

BASE: dict[str, Any] = {
    "site": "plant-1",
    "central": "central.example:8883",
    "account_secret_file": "/s",
    "tls_ca_file": "/ca.crt",
}


def test_load_env_then_flags() -> None:
    env = {"IOT_SITE": "from-env", "IOT_OUTAGE_S": "120", "IOT_CENTRAL": "c:1"}
    cfg = EdgeConfig.load(
        ["--site", "plant-9", "--account-secret-file", "/s", "--insecure-plain-link"], env
    )
    assert (cfg.site, cfg.outage_s, cfg.central_address()) == ("plant-9", 120.0, ("c", 1))
    assert cfg.queues().max_queued_messages == 120 * 100 * 5 // 4 + 20


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"site": ""}, "--site"),
        ({"central": "nohost"}, "HOST:PORT"),
        ({"central": "h:99999"}, "HOST:PORT"),
        ({"account_secret_file": ""}, "secret"),
        ({"tls_ca_file": ""}, "TLS"),
        ({"tls_cert_file": "/c.crt"}, "go together"),
        ({"tenant": "Bad Tenant"}, "tenant"),
        ({"autosave_changes": 0}, "autosave"),
        ({"restart_min_s": 5, "restart_max_s": 2}, "restart"),
    ],
)
def test_bad_settings_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EdgeConfig(**{**BASE, **change})


def test_plain_link_only_when_asked_for() -> None:
    cfg = EdgeConfig(**{**BASE, "tls_ca_file": "", "insecure_plain_link": True})
    assert not cfg.tls_ca_file


def test_site_topics_follow_the_tenant_root() -> None:
    assert EdgeConfig(**BASE).state_topic == "sites/plant-1/state"
    other = EdgeConfig(**{**BASE, "tenant": "acme"})
    assert other.status_topic == "tenants/acme/sites/plant-1/status"


def test_json_round_trip_and_unknown_keys() -> None:
    cfg = EdgeConfig(**BASE)
    assert EdgeConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(ConfigError, match="unknown"):
        EdgeConfig.from_json({**cfg.to_json(), "surprise": 1})
