"""Which MQTT shard holds a client (pure): the one hash of the sharded MQTT tier.

A client's shard is the CRC-32 (IEEE 802.3, the one of zlib and gzip) of its MQTT client
identifier's UTF-8 bytes, modulo the number of shards, 0-based. HAProxy computes the same number
from the CONNECT packet (``mqtt_field_value(connect,client_identifier),crc32,mod(N)``,
stack/haproxy_config.py) and the command path from a device id (client id = device id), so both
agree on where a device is without asking anyone. Stable: the same id and N give the same shard
on every host and release; changing N moves about (N-1)/N of the clients. Here, not in the
launcher, because the command path (`commands`) uses it and may not import `stack`.
"""

from __future__ import annotations

import zlib


def shard_of(client_id: str, shards: int) -> int:
    """The 0-based shard of ``client_id`` among ``shards`` (an empty id: shard 0)."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return zlib.crc32(client_id.encode("utf-8")) % shards
