"""The MQTT session settings of `BridgeConfig`, as the keyword arguments of the bridge's MQTT
clients: the telemetry :class:`~bridge.mqtt_client.Subscriber` and the command path's
:class:`~commands.link_pool.LinkPool` connect to the same Mosquitto the same way.

Pure: reads the config (and the password file it may name), opens no connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from bridge.config import BridgeConfig
from bridge.errors import ConfigError

__all__ = ["MqttSessionSettings", "mqtt_password", "mqtt_session_settings"]


class MqttSessionSettings(TypedDict):
    host: str
    port: int
    keepalive: int
    session_expiry: int
    receive_maximum: int
    username: str
    password: str
    reconnect_min_s: float
    reconnect_max_s: float


def mqtt_session_settings(config: BridgeConfig) -> MqttSessionSettings:
    """Where and how to connect; the client id and subscriptions are each client's own."""
    return MqttSessionSettings(
        host=config.mqtt_host,
        port=config.mqtt_port,
        keepalive=config.mqtt_keepalive_s,
        session_expiry=config.mqtt_session_expiry_s,
        receive_maximum=config.mqtt_receive_maximum,
        username=config.mqtt_username,
        password=mqtt_password(config),
        reconnect_min_s=config.mqtt_reconnect_min_s,
        reconnect_max_s=config.mqtt_reconnect_max_s,
    )


def mqtt_password(config: BridgeConfig) -> str:
    """The password: the first line of ``mqtt_password_file`` when set, else ``mqtt_password``."""
    if not config.mqtt_password_file:
        return config.mqtt_password
    try:
        text = Path(config.mqtt_password_file).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read mqtt_password_file: {exc}") from exc
    lines = text.splitlines()
    return lines[0].strip() if lines else ""
