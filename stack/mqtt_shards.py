"""The sharded MQTT tier's ports and checks (pure; `iot-stack up --mqtt-shards N`). Which
shard holds a client is :func:`bridge.shards.shard_of` (the command path needs it too).
"""

from __future__ import annotations

from bridge.shards import shard_of
from stack.errors import StackError

MAX_PORT = 65535
MAX_SHARDS = 64

__all__ = ["MAX_SHARDS", "check_shards", "shard_of", "shard_ports"]


def shard_ports(mqtt_port: int, shards: int) -> list[int]:
    """The shards' own ports: ``mqtt_port + 1`` .. ``mqtt_port + N`` (HAProxy holds
    ``mqtt_port``); none with one shard, which is Mosquitto on ``mqtt_port`` itself."""
    if shards <= 1:
        return []
    return [mqtt_port + i for i in range(1, shards + 1)]


def check_shards(mqtt_port: int, shards: int, others: dict[str, int]) -> None:
    """Raise :class:`StackError` when ``shards`` is out of range or its ports do not fit:
    past 65535, or on a port another setting (``others``: name -> port) uses."""
    if not 1 <= shards <= MAX_SHARDS:
        raise StackError(f"mqtt_shards must be 1-{MAX_SHARDS}, got {shards}")
    ports = shard_ports(mqtt_port, shards)
    if ports and ports[-1] > MAX_PORT:
        room = MAX_PORT - mqtt_port
        raise StackError(
            f"mqtt_shards {shards} needs ports {ports[0]}-{ports[-1]} (mqtt_port + 1 .. + N), "
            f"past {MAX_PORT}: at most {room} shards above mqtt_port {mqtt_port}"
        )
    for name, port in others.items():
        if port in ports:
            raise StackError(
                f"{name} {port} is one of the MQTT shards' ports {ports[0]}-{ports[-1]} "
                f"(mqtt_port + 1 .. + {shards}): move it, or mqtt_port"
            )
