from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edge import render
from edge.config import EdgeConfig
from edge.errors import ConfigError
from registry.dynsec_config import check_pbkdf2

BASE: dict[str, Any] = {
    "site": "plant-1",
    "central": "10.0.0.1:8883",
    "account_secret_file": "/s",
    "tls_ca_file": "/etc/ca.crt",
    "outage_s": 60.0,
    "rate_msgs_per_s": 10.0,
    "autosave_changes": 250,
}
PATHS = render.SitePaths(Path("/site"))


def _conf(**change: Any) -> list[str]:
    cfg = EdgeConfig(**{**BASE, **change})
    return render.mosquitto_conf(cfg, PATHS, "s3cret", ["d2", "d1"], "edgeuser").splitlines()


def test_bridge_section_is_the_one_that_keeps_commands() -> None:
    lines = _conf()
    for line in (
        "bridge_protocol_version mqttv311",
        "cleansession false",
        "persistence true",
        "autosave_on_changes true",
        "autosave_interval 250",
        f"max_queued_messages {60 * 10 * 5 // 4 + 20}",
        f"max_queued_bytes {(60 * 10 * 5 // 4 + 20) * 512}",
        "address 10.0.0.1:8883",
        "remote_username svc/plant-1",
        "remote_password s3cret",
        "bridge_cafile /etc/ca.crt",
        "notification_topic sites/plant-1/state",
        "allow_anonymous false",
        "topic devices/+/telemetry out 1",
        "topic sites/plant-1/status out 0",
        "user edgeuser",
    ):
        assert line in lines, line
    ins = [line for line in lines if line.endswith(" in 1")]
    assert ins == ["topic devices/d1/commands/# in 1", "topic devices/d2/commands/# in 1"]
    assert not any(
        "#" in line.split(" ", 1)[1] for line in lines if line.startswith(("address", "remote_"))
    )
    assert all(not line.startswith("#") or line.startswith("# ") for line in lines)


def test_plain_link_has_no_tls_lines_and_tenant_topics_are_rooted() -> None:
    lines = _conf(tls_ca_file="", insecure_plain_link=True, tenant="acme")
    assert not [line for line in lines if line.startswith("bridge_ca")]
    assert "topic tenants/acme/devices/+/telemetry out 1" in lines
    assert "topic tenants/acme/devices/d1/commands/# in 1" in lines
    assert "remote_username svc/plant-1" in lines


def test_client_certificate_lines() -> None:
    lines = _conf(tls_cert_file="/c.crt", tls_key_file="/c.key")
    assert "bridge_certfile /c.crt" in lines
    assert "bridge_keyfile /c.key" in lines


def test_password_file_holds_verifiable_hashes_only() -> None:
    cfg = EdgeConfig(**{**BASE, "tenant": "acme"})
    text = render.password_file(cfg, {"d1": "pw-one"}, "mon")
    assert "pw-one" not in text
    users = dict(line.split(":", 1) for line in text.splitlines())
    assert set(users) == {"acme/d1", render.MONITOR_USER}
    _, seven, iterations, salt, key = users["acme/d1"].split("$")
    assert seven == "7"
    entry = {"password": key, "salt": salt, "iterations": int(iterations)}
    assert check_pbkdf2("pw-one", entry)
    assert not check_pbkdf2("pw-two", entry)


def test_acl_keeps_each_device_to_its_own_topics() -> None:
    cfg = EdgeConfig(**BASE)
    text = render.acl_file(cfg, ["d1"])
    block = text.split("\n\n")[0].splitlines()
    assert block[0] == "user d1"
    assert "topic write devices/d1/telemetry" in block
    assert "topic read devices/d1/commands/#" in block
    assert not [line for line in block if "d2" in line or line.endswith("devices/#")]
    assert "topic write sites/plant-1/status" in text


def test_ids_mosquitto_files_cannot_hold_are_refused() -> None:
    cfg = EdgeConfig(**BASE)
    with pytest.raises(ConfigError, match="':'"):
        render.acl_file(cfg, ["a:b"])
    with pytest.raises(ConfigError):
        render.password_file(cfg, {"bad id": "x"}, "m")
