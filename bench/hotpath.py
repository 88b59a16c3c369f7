"""``python -m bench.hotpath``: the bridge's Python path per message, in one process, no servers.

Real code from MQTT bytes to PUBACK bytes: ``bridge.mqtt_client``'s packet decoder, the
telemetry pipeline (validation, mapping, ack window, stats) and the PUBACK encoder; only the
Kafka producer is a stand-in that keeps each record's delivery callback and calls it with a
message object on ``poll()``, as confluent-kafka does. 1,000 devices' design payloads arrive in
socket-sized chunks. It prints CPU microseconds per message (process time); run it with
``--roots A,B`` to compare two checkouts in alternating subprocesses (A B A B ...).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_CHUNK = 65536  # bytes per data_received, like a socket read under load


class _Msg:
    __slots__ = ("_k", "_t")

    def __init__(self, topic: str, key: bytes | None) -> None:
        self._t = topic
        self._k = key


class _Producer:
    def __init__(self) -> None:
        self.pending: list[tuple[Any, _Msg]] = []

    def produce(  # noqa: PLR0917 - confluent-kafka's signature, called by position
        self,
        topic: str,
        value: bytes,
        key: Any = None,
        partition: int = -1,
        on_delivery: Any = None,
        callback: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self.pending.append((on_delivery, _Msg(topic, key)))

    def poll(self, timeout: float = 0) -> int:
        served = self.pending
        self.pending = []
        for cb, msg in served:
            if cb is not None:  # sparse reports: only a partition's marker asks for one
                cb(None, msg)
        return len(served)

    def flush(self, timeout: float = 0) -> int:
        return self.poll()

    def __len__(self) -> int:
        return len(self.pending)


class _Transport:
    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _packets(devices: int, count: int, payload_bytes: int) -> bytes:
    import mqtt_codec as codec
    from bench.payload import PayloadMaker, device_id, telemetry_topic

    makers = [PayloadMaker(device_id(i), payload_bytes) for i in range(devices)]
    out = bytearray()
    ts = time.time_ns() // 1_000_000
    for n in range(count):
        i = n % devices
        out += codec.encode_publish(
            telemetry_topic(device_id(i)), makers[i].make(ts, n // devices), 1, n % 65535 + 1
        )
    return bytes(out)


def measure(messages: int, payload_bytes: int, rounds: int) -> list[float]:
    """CPU microseconds per message, one figure per round."""
    import asyncio

    from bridge.config import BridgeConfig
    from bridge.mqtt_client import Subscriber, _Connection
    from bridge.service import TelemetryBridge

    data = _packets(1000, messages, payload_bytes)
    from bridge import service as bridge_service

    tune = getattr(bridge_service, "tune_gc", None)  # absent in older checkouts
    if tune is not None:
        tune()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    cfg = BridgeConfig(pending_max_messages=messages * 2, pending_max_bytes=1 << 40)
    results = []
    for _ in range(rounds + 1):  # the first round warms the caches up and is not counted
        bridge = TelemetryBridge(cfg)
        producer = _Producer()
        bridge._producer = producer
        if hasattr(bridge, "partition_counts"):  # as _check_topics finds them
            bridge.partition_counts[cfg.topic_telemetry] = 12
        bridge._loop = loop
        sub = Subscriber(
            bridge,
            host="x",
            port=1,
            client_id="c",
            filters=("devices/+/telemetry",),
            keepalive=0,
            session_expiry=0,
            receive_maximum=65535,
        )
        sub._loop = loop
        bridge.subscriber = sub
        conn = _Connection(sub)
        transport = _Transport()
        conn.transport = transport  # type: ignore[assignment]
        sub._conn = conn
        sub.connected = True
        sub.generation = 1
        t0 = time.process_time()
        for pos in range(0, len(data), _CHUNK):
            conn.data_received(data[pos : pos + _CHUNK])
            bridge._tick()
        bridge._tick()
        elapsed = time.process_time() - t0
        if bridge._tick_handle is not None:
            bridge._tick_handle.cancel()
        if bridge.stats.acked != messages or not transport.written:
            raise RuntimeError(f"acked {bridge.stats.acked} of {messages}")
        results.append(elapsed / messages * 1e6)
    loop.close()
    return results[1:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hotpath", description=__doc__)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--payload", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3, help="measured rounds per process")
    p.add_argument("--roots", default="", help="comma-separated checkouts to compare")
    p.add_argument("--repeat", type=int, default=3, help="alternating processes per root")
    args = p.parse_args(argv)
    if not args.roots:
        print(json.dumps(measure(args.messages, args.payload, args.rounds)))
        return 0
    roots = [str(Path(r).resolve()) for r in args.roots.split(",")]
    runs: dict[str, list[float]] = {r: [] for r in roots}
    for _ in range(args.repeat):
        for root in roots:
            env = {**os.environ, "PYTHONPATH": root}
            argv2 = [sys.executable, "-m", "bench.hotpath", "--messages", str(args.messages)]
            argv2 += ["--payload", str(args.payload), "--rounds", str(args.rounds)]
            out = subprocess.run(
                argv2, check=False, env=env, cwd=root, capture_output=True, text=True
            )
            if out.returncode:
                print(out.stderr, file=sys.stderr)
                return 1
            figures = json.loads(out.stdout)
            runs[root].extend(figures)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"{root}: {' '.join(f'{f:.2f}' for f in figures)} us/msg (load {load})")
    for root, figures in runs.items():
        print(
            f"{root}: median {statistics.median(figures):.2f} us/msg, "
            f"min {min(figures):.2f}, max {max(figures):.2f} ({len(figures)} rounds)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
