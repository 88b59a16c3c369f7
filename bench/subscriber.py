"""The "limit" sink: a raw-socket MQTT 5 subscriber that only counts (and acks, batched per read).

It stands for a bridge with zero cost per message, so the rate it sees is what Mosquitto can
deliver one-to-one with the same publisher load: the ceiling every bridge is compared with.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from typing import Any

import mqtt_codec as codec

_TS_KEY = b'{"ts":'


def count_forever(
    *,
    host: str,
    port: int,
    topic_filter: str,
    qos: int,
    counter: Any,  # mp.Value("q"): messages received, updated after every read
    ready: Any,  # mp.Event: set once the subscription is acknowledged
    stop: Any,  # mp.Event
    latencies: Any,  # mp.Queue or None: (receive ms - ts ms) samples, sent at stop
    latency_from_ms: Any,  # mp.Value("q"): only messages with ts at or after it are sampled
) -> None:
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(
        codec.encode_connect(
            f"bench-counter-{time.time_ns()}", keepalive=0, clean_start=True, receive_maximum=65535
        )
    )
    sock.sendall(codec.encode_subscribe(1, (topic_filter,), qos))
    sock.settimeout(None)  # blocking: acks must go out even while Mosquitto is busy
    buf = bytearray()  # the start of a packet not complete yet
    split = codec.split_packets
    publish_kind = codec.PUBLISH
    suback_kind = codec.SUBACK
    n = 0
    samples: list[int] = []
    want_latency = latencies is not None
    subscribed = False
    try:
        while not stop.is_set():
            readable, _, _ = select.select([sock], [], [], 0.2)
            if not readable:
                continue
            data = sock.recv(1 << 18)
            if not data:
                break
            acks: list[bytes] = []
            now_ms = time.time_ns() // 1_000_000 if want_latency else 0
            lat_from = latency_from_ms.value
            buf += data
            packets, used = split(buf)
            del buf[:used]
            for first, body in packets:
                kind = first >> 4
                if kind == publish_kind:
                    n += 1
                    if first & 0x06:
                        # topic length, topic, then the packet id
                        tlen = (body[0] << 8) | body[1]
                        acks.append(b"\x40\x02" + body[2 + tlen : 4 + tlen])
                    if want_latency:
                        at = body.find(_TS_KEY)
                        if at >= 0:
                            end = body.index(b",", at)
                            ts = int(body[at + 6 : end])
                            if ts >= lat_from:
                                samples.append(now_ms - ts)
                elif kind == suback_kind and not subscribed:
                    subscribed = True
                    ready.set()
            if acks:
                sock.sendall(b"".join(acks))
            counter.value = n
    finally:
        with contextlib.suppress(OSError):
            sock.sendall(codec.DISCONNECT_NORMAL)
            sock.close()
        if latencies is not None:
            latencies.put(samples)
