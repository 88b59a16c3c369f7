"""The MQTT session settings both of the bridge's MQTT clients take from `BridgeConfig`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import BridgeConfig
from bridge.errors import ConfigError
from bridge.mqtt_client import Subscriber
from bridge.mqtt_settings import mqtt_password, mqtt_session_settings
from commands.link_pool import LinkPool


def test_both_clients_connect_where_and_how_the_config_says() -> None:
    cfg = BridgeConfig(
        mqtt_host="mq.example",
        mqtt_port=8883,
        mqtt_keepalive_s=12,
        mqtt_session_expiry_s=600,
        mqtt_receive_maximum=77,
        mqtt_username="u",
        mqtt_password="p",
        mqtt_reconnect_min_s=0.25,
        mqtt_reconnect_max_s=4.0,
    )
    settings = mqtt_session_settings(cfg)
    sub = Subscriber(None, client_id="t", filters=("a/#",), **settings)  # type: ignore[arg-type]
    pool = LinkPool(client_id="c", subscription="r/#", publishers=1, **settings)
    reply, publisher = pool.links
    for client in (sub, reply):
        assert (client.host, client.port, client.keepalive) == ("mq.example", 8883, 12)
        assert (client.session_expiry, client.receive_maximum) == (600, 77)
        assert (client.username, client.password) == ("u", "p")
    assert (sub.reconnect_min_s, sub.reconnect_max_s) == (0.25, 4.0)
    assert (pool.reconnect_min_s, pool.reconnect_max_s) == (0.25, 4.0)
    assert publisher.session_expiry == 0  # publishing links have clean sessions


def test_password_file_wins_and_keeps_the_secret_out_of_the_config(tmp_path: Path) -> None:
    secret = tmp_path / "bridge.secret"
    secret.write_text("from-file\n")
    cfg = BridgeConfig(mqtt_username="svc/bridge", mqtt_password="inline",
                       mqtt_password_file=str(secret))  # fmt: skip
    assert mqtt_session_settings(cfg)["password"] == "from-file"
    assert mqtt_password(BridgeConfig(mqtt_password="inline")) == "inline"


def test_unreadable_password_file_is_a_config_error(tmp_path: Path) -> None:
    cfg = BridgeConfig(mqtt_password_file=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="mqtt_password_file"):
        mqtt_session_settings(cfg)
