"""HAProxy's config for the sharded MQTT tier (pure): one TCP front on the MQTT listener
address that reads each connection's CONNECT packet and sends it to the shard of its client
identifier (:func:`stack.mqtt_shards.shard_of` computes the same shard in Python).

Plain MQTT only: HAProxy must read the CONNECT, so a TLS front would have to terminate TLS,
and Mosquitto would then no longer see the device's certificate (docs/scaling.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# how long HAProxy waits for a whole CONNECT before it drops the connection
CONNECT_WAIT_S = 10
# longer than any device's MQTT keep-alive x 1.5 (Mosquitto closes idle clients itself)
IDLE_TIMEOUT_S = 3600


@dataclass(frozen=True)
class ShardAddress:
    host: str
    port: int


def backend_name(index: int) -> str:
    """The backend of 0-based shard ``index`` (shards are numbered from 1 for people)."""
    return f"shard-{index + 1}"


def render(
    bind_host: str,
    port: int,
    shards: Sequence[ShardAddress],
    *,
    connect_wait_s: int = CONNECT_WAIT_S,
    idle_timeout_s: int = IDLE_TIMEOUT_S,
) -> str:
    """The whole config file. Shard ``i`` of ``shards`` (0-based) gets every client whose
    ``crc32(client id) % len(shards) == i``; anything that is not a valid MQTT CONNECT
    within ``connect_wait_s`` is refused."""
    if not shards:
        raise ValueError("need at least one shard")
    n = len(shards)
    lines = [
        "# HAProxy in front of the MQTT shards, rendered by `iot-stack up --mqtt-shards N`",
        "# (stack/haproxy_config.py). Do not edit: rewritten on every start.",
        "global",
        # no maxconn: HAProxy derives it from the file-descriptor limit it runs with
        "",
        "defaults",
        "    mode tcp",
        "    timeout connect 5s",
        f"    timeout client {idle_timeout_s}s",
        f"    timeout server {idle_timeout_s}s",
        "",
        "frontend mqtt",
        f"    bind {bind_host}:{port}",
        f"    tcp-request inspect-delay {connect_wait_s}s",
        "    tcp-request content reject unless { req.payload(0,0),mqtt_is_valid }",
        "    tcp-request content set-var(sess.shard) "
        f"req.payload(0,0),mqtt_field_value(connect,client_identifier),crc32,mod({n})",
    ]
    lines += [
        f"    use_backend {backend_name(i)} if {{ var(sess.shard) -m int {i} }}" for i in range(n)
    ]
    # a CONNECT without a client id field never happens (MQTT 3.1.1 and 5 both carry one,
    # possibly empty: crc32 of nothing is 0, shard 1, as in Python)
    lines.append(f"    default_backend {backend_name(0)}")
    for i, shard in enumerate(shards):
        lines += [
            "",
            f"backend {backend_name(i)}",
            f"    server mosquitto-{i + 1} {shard.host}:{shard.port}",
        ]
    return "\n".join(lines) + "\n"
