"""Ad-hoc throughput probe for the bridge (issue 3), not the formal benchmark suite.

``python -m bench.bridge_probe --mqtt-port P --kafka-bootstrap H:P [--messages N] [--size 1024]``

1. ceiling: a raw MQTT 5 publisher (separate process, pre-encoded QoS 1 packets, 1,000 device
   topics) into Mosquitto, with a minimal subscriber that PUBACKs and counts (batched acks).
2. bridge: the same publisher load with ``iot-bridge`` (a subprocess) as the subscriber; the
   run ends when the bridge has acknowledged every message (ack-after-Kafka).
Prints msgs/s for both, the ratio, and the bridge's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import mqtt_codec as codec
from bridge.mqtt_client import Subscriber

ROOT = Path(__file__).resolve().parents[1]


def _payload(device: int, seq: int, size: int) -> bytes:
    head = (
        f'{{"ts":{int(time.time() * 1000)},"seq":{seq},'
        f'"metrics":{{"temp":21.5,"hum":40.25,"v":{seq % 97}}},"tags":{{"pad":"'
    )
    tail = '"}}'
    pad = max(0, size - len(head) - len(tail))
    return (head + "x" * pad + tail).encode()


def publisher(  # noqa: PLR0917 - a multiprocessing target takes positional args
    host: str,
    port: int,
    messages: int,
    size: int,
    devices: int,
    prefix: str,
    window: int,
    rate: float,
    done: mp.Queue,
) -> None:
    """Raw QoS 1 publisher: keeps at most ``window`` PUBLISH packets unacknowledged."""
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(
        codec.encode_connect(
            f"probe-pub-{uuid.uuid4().hex[:6]}",
            keepalive=60,
            clean_start=True,
            session_expiry=0,
            receive_maximum=65535,
        )
    )
    acked = 0
    lock = threading.Condition()
    stop = False

    def reader() -> None:
        nonlocal acked
        buf = bytearray()
        while not stop:
            try:
                data = sock.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            buf += data
            packets, used = codec.split_packets(buf)
            del buf[:used]
            n = sum(1 for first, _ in packets if first >> 4 == codec.PUBACK)
            if n:
                with lock:
                    acked += n
                    lock.notify_all()

    threading.Thread(target=reader, daemon=True).start()
    time.sleep(0.2)  # CONNACK
    sent = 0
    batch = 200
    start = time.monotonic()
    while sent < messages:
        with lock:
            while sent - acked > window - batch:
                lock.wait(1)
        chunk = []
        for _ in range(min(batch, messages - sent)):
            device = sent % devices
            seq = sent // devices
            mid = sent % 65535 + 1
            chunk.append(
                codec.encode_publish(
                    f"devices/{prefix}{device:04d}/telemetry", _payload(device, seq, size), 1, mid
                )
            )
            sent += 1
        sock.sendall(b"".join(chunk))
        if rate:
            ahead = sent / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    with lock:
        while acked < messages:
            lock.wait(1)
    elapsed = time.monotonic() - start
    stop = True
    done.put(("published", sent, elapsed))
    sock.close()


class _CountingSink:
    def __init__(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.sub: Subscriber | None = None
        self.first = 0.0
        self.last = 0.0
        self.pending: list[int] = []
        self.finished = asyncio.Event()
        self.flush_scheduled = False

    def on_publish(self, topic: str, payload: bytes, qos: int, packet_id: int, dup: bool) -> None:
        if not self.count:
            self.first = time.monotonic()
        self.count += 1
        if packet_id:
            self.pending.append(packet_id)
            if not self.flush_scheduled:
                self.flush_scheduled = True
                asyncio.get_running_loop().call_soon(self.flush)
        if self.count >= self.target:
            self.last = time.monotonic()
            self.finished.set()

    def flush(self) -> None:
        self.flush_scheduled = False
        assert self.sub is not None
        self.sub.send_acks(self.sub.generation, self.pending)
        self.pending = []

    def on_read_done(self) -> None:
        return

    def on_connection_change(self, generation: int, connected: bool) -> None:
        return


async def _count(host: str, port: int, prefix: str, target: int, ready: asyncio.Event) -> float:
    sink = _CountingSink(target)
    sub = Subscriber(
        sink,
        host=host,
        port=port,
        client_id=f"probe-sub-{uuid.uuid4().hex[:6]}",
        filters=("devices/+/telemetry",),
        keepalive=60,
        session_expiry=0,
        receive_maximum=65535,
    )
    sink.sub = sub
    task = asyncio.create_task(sub.run())
    while not sub.connected:  # noqa: ASYNC110 - the subscriber has no connected event
        await asyncio.sleep(0.01)
    ready.set()
    await sink.finished.wait()
    await sub.stop()
    task.cancel()
    return target / (sink.last - sink.first)


def _publisher_process(args: argparse.Namespace, prefix: str, done: mp.Queue) -> mp.Process:
    """The load publisher as a child process (not started), configured from the probe's flags."""
    return mp.Process(
        target=publisher,
        args=(
            args.mqtt_host,
            args.mqtt_port,
            args.messages,
            args.size,
            args.devices,
            prefix,
            args.window,
            args.rate,
            done,
        ),
    )


def ceiling(args: argparse.Namespace) -> float:
    prefix = f"c{uuid.uuid4().hex[:4]}-"
    done: mp.Queue = mp.Queue()

    async def run() -> float:
        ready = asyncio.Event()
        counter = asyncio.create_task(
            _count(args.mqtt_host, args.mqtt_port, prefix, args.messages, ready)
        )
        await ready.wait()
        proc = _publisher_process(args, prefix, done)
        proc.start()
        rate = await counter
        proc.join()
        return rate

    return asyncio.run(run())


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bridge_run(args: argparse.Namespace) -> tuple[float, float, dict[str, float]]:
    prefix = f"b{uuid.uuid4().hex[:4]}-"
    env = dict(os.environ)
    env.update(
        IOT_MQTT_HOST=args.mqtt_host,
        IOT_MQTT_PORT=str(args.mqtt_port),
        IOT_KAFKA_BOOTSTRAP=args.kafka_bootstrap,
        IOT_MQTT_CLIENT_ID=f"probe-bridge-{uuid.uuid4().hex[:6]}",
        IOT_HTTP_PORT="0",
        IOT_LOG_FORMAT="json",
        IOT_MQTT_SESSION_EXPIRY_S="0",
    )
    for item in args.set or []:
        key, _, value = item.partition("=")
        env["IOT_" + key.upper()] = value
    log = open(args.log, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge.cli"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    port = None
    deadline = time.monotonic() + 60
    while port is None and time.monotonic() < deadline:
        found = re.search(rb'"http_port":(\d+)', Path(args.log).read_bytes())
        port = int(found.group(1)) if found else None
        time.sleep(0.1)
    assert port is not None
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    done: mp.Queue = mp.Queue()
    pub = _publisher_process(args, prefix, done)
    base = _metrics(port).get("iot_bridge_acked_total", 0.0)
    peak_rss = 0.0
    cpu0 = _cpu_s(proc.pid)
    pub.start()
    first = None
    last_acked = base
    t_last = time.monotonic()
    while True:
        m = _metrics(port)
        acked = m.get("iot_bridge_acked_total", 0.0)
        now = time.monotonic()
        if first is None and acked > base:
            first = (now, acked)
        peak_rss = max(peak_rss, _rss_mb(proc.pid))
        if acked >= base + args.messages:
            break
        if acked != last_acked:
            last_acked, t_last = acked, now
        elif now - t_last > 30:
            raise RuntimeError("bridge stalled")
        time.sleep(0.05)
    end = time.monotonic()
    cpu = _cpu_s(proc.pid) - cpu0
    threads: dict[str, float] = {}
    for task in Path(f"/proc/{proc.pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        cpu_t = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        threads[name] = threads.get(name, 0.0) + cpu_t
    print(
        "bridge threads CPU s (whole life):",
        {k: round(v, 1) for k, v in threads.items() if v >= 0.1},
    )
    print(
        f"bridge CPU: {cpu:.1f} s for {args.messages} messages = "
        f"{cpu / args.messages * 1e6:.1f} us/msg"
    )
    assert first is not None
    rate = (base + args.messages - first[1]) / (end - first[0])
    pub.join()
    final = _metrics(port)
    proc.terminate()
    proc.wait(30)
    return rate, peak_rss, final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mqtt-host", default="127.0.0.1", help="Mosquitto host")
    parser.add_argument("--mqtt-port", type=int, required=True, help="Mosquitto port")
    parser.add_argument("--kafka-bootstrap", required=True, help="Kafka bootstrap")
    parser.add_argument("--messages", type=int, default=200_000, help="messages per run")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes")
    parser.add_argument("--devices", type=int, default=1000, help="device topics")
    parser.add_argument("--window", type=int, default=20000, help="publisher in-flight window")
    parser.add_argument("--rate", type=float, default=0, help="publisher rate limit (0 = none)")
    parser.add_argument("--skip-ceiling", action="store_true", help="only run the bridge")
    parser.add_argument("--set", action="append", help="bridge setting name=value (repeatable)")
    parser.add_argument("--log", default="bridge-probe.log", help="bridge log file")
    args = parser.parse_args(argv)
    top = 0.0
    if not args.skip_ceiling:
        top = ceiling(args)
        print(f"ceiling (Mosquitto -> counting subscriber): {top:,.0f} msgs/s")
    rate, rss, final = bridge_run(args)
    lat = {k: v for k, v in final.items() if "latency" in k}
    print(f"bridge (ack after Kafka): {rate:,.0f} msgs/s, peak RSS {rss:.0f} MB")
    if top:
        print(f"ratio: {rate / top:.2f}")
    print(f"bridge high water pending: {final.get('iot_bridge_pending_high_water_messages')}")
    count = lat.get("iot_bridge_produce_latency_seconds_count", 0)
    buckets = sorted(
        (float(k.split('le="')[1].split('"')[0]), v)
        for k, v in lat.items()
        if "_bucket" in k and "+Inf" not in k
    )
    for q in (0.5, 0.99):
        prev_bound, prev_n = 0.0, 0.0
        for bound, n in buckets:
            if n >= q * count:
                frac = (q * count - prev_n) / max(n - prev_n, 1)
                value = prev_bound + frac * (bound - prev_bound)
                print(f"p{int(q * 100)} receipt->Kafka ack: {value * 1000:.0f} ms (interpolated)")
                break
            prev_bound, prev_n = bound, n
    return 0


if __name__ == "__main__":
    sys.exit(main())
