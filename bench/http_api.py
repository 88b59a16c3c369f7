"""`make bench-http`: iot-api over a real Kafka (issue 14 item 9).

One Kafka (own, on free ports, unless ``--kafka-bootstrap``), one `iot-api` process
(``--insecure-anonymous``: the door's cost, not the scrypt check the Basic-auth cache skips
after the first request). The load generator is this process: raw keep-alive sockets with
pre-built requests. Phases, each on a fresh topic:

1. publish 1 KiB messages in batches of 100 (msgs/s answered 200, i.e. acknowledged by Kafka)
   and, in the same run, confluent-kafka's producer alone with the same settings;
2. single-message publishes, requests/s;
3. long-poll consume (MR group) of messages produced beforehand, msgs/s;
4. publish -> long-poll delivery latency at a steady rate, p50/p99;
5. iot-api's resident memory idle and with ``--long-polls`` long polls open (distinct ids).

    python -m bench.http_api --seconds 5 --out-dir bench/results
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from stack.ports import free_port

MESSAGE = {"device": "bench", "pad": "x" * 997}  # 1 KiB as compact JSON (1,024 bytes)
BATCH = 100
PHASES = ("batch", "single", "consume", "latency", "memory")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def request_bytes(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def batch_body(count: int, stamp: bool = False) -> bytes:
    items = [dict(MESSAGE, at=time.time()) if stamp else MESSAGE for _ in range(count)]
    return json.dumps(items).encode()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return status, await reader.readexactly(length)


async def _publish_load(port: int, topic: str, per_request: int, seconds: float, conns: int) -> int:
    """Messages answered 200 by `conns` connections publishing for `seconds`."""
    request = request_bytes("POST", f"/events/{topic}", batch_body(per_request))
    deadline = time.monotonic() + seconds
    acked = 0

    async def one() -> None:
        nonlocal acked
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < deadline:
            status, _ = await _exchange(reader, writer, request)
            if status == 200:
                acked += per_request
        writer.close()

    await asyncio.gather(*(one() for _ in range(conns)))
    return acked


def producer_alone(bootstrap: str, topic: str, seconds: float) -> float:
    """confluent-kafka alone, iot-api's producer settings (acks=all, idempotent, linger 5)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )  # fmt: skip
    value = json.dumps(MESSAGE).encode()
    acked = 0

    def done(err: Any, _msg: Any) -> None:
        nonlocal acked
        acked += err is None

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, value, on_delivery=done)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return acked / (time.monotonic() - started)


async def _register(port: int, topic: str) -> None:
    """A first GET: MR creates the group at the log end (what is produced after, it reads)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await _exchange(reader, writer, request_bytes("GET", f"/events/{topic}/bench/c1?timeout=0"))
    writer.close()


async def _consume(port: int, topic: str, want: int, timeout_s: float) -> tuple[int, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got, started = 0, time.monotonic()
    path = f"/events/{topic}/bench/c1?timeout=1000&limit=10000"
    while got < want and time.monotonic() - started < timeout_s:
        status, body = await _exchange(reader, writer, request_bytes("GET", path))
        if status == 200:
            got += len(json.loads(body))
    writer.close()
    return got, time.monotonic() - started


async def _latency(port: int, topic: str, rate: float, seconds: float) -> tuple[list[float], int]:
    """ms from a publish request's send to its message in a long poll, at `rate` msgs/s."""
    latencies: list[float] = []
    stop = asyncio.Event()

    async def poll() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        path = f"/events/{topic}/lat/c1?timeout=2000&limit=1000"
        while not stop.is_set():
            status, body = await _exchange(reader, writer, request_bytes("GET", path))
            now = time.time()
            if status == 200:
                latencies.extend((now - json.loads(m)["at"]) * 1000 for m in json.loads(body))
        writer.close()

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # the topic first (a publish creates it), then the group, at the log end
    await _exchange(reader, writer, request_bytes("POST", f"/events/{topic}", batch_body(1, True)))
    await _exchange(reader, writer, request_bytes("GET", f"/events/{topic}/lat/c1?timeout=0"))
    poller = asyncio.create_task(poll())
    await asyncio.sleep(1.0)  # the group is at the log end before the first publish
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < seconds:
        await _exchange(
            reader, writer, request_bytes("POST", f"/events/{topic}", batch_body(1, True))
        )
        sent += 1
        await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
    await asyncio.sleep(3.0)
    stop.set()
    await poller
    writer.close()
    return latencies, sent


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _open_polls(
    port: int, topic: str, count: int, pid: int
) -> tuple[float, int, dict[str, int]]:
    """RSS (MiB) while `count` long polls (distinct consumer ids) wait; polls answered 200, and
    every outcome by status (or exception name) so a poll that failed says how."""
    request_path = f"/events/{topic}/polls/c{{}}?timeout=20000"

    async def one(i: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        status, _ = await _exchange(reader, writer, request_bytes("GET", request_path.format(i)))
        writer.close()
        return status

    tasks = [asyncio.create_task(one(i)) for i in range(count)]
    await asyncio.sleep(12.0)  # every poll is open by now (20 s timeout)
    rss = _rss_mib(pid)
    statuses = await asyncio.gather(*tasks, return_exceptions=True)
    outcomes: dict[str, int] = {}
    for s in statuses:
        name = type(s).__name__ if isinstance(s, BaseException) else str(s)
        outcomes[name] = outcomes.get(name, 0) + 1
    return rss, sum(1 for s in statuses if s == 200), outcomes


def wait_ready(url: str, timeout: float = 120) -> None:
    """Until ``url`` answers 200 (a service's /readyz), or RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} not ready in {timeout:.0f} s")


def run(bootstrap: str, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    port, suffix = free_port(), uuid.uuid4().hex[:6]
    argv = [sys.executable, "-m", "api", "--insecure-anonymous", "--log-level", "WARNING",
            "--kafka-bootstrap", bootstrap, "--api-port", str(port)]  # fmt: skip
    with log.open("w") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        rss_idle = _rss_mib(server.pid)
        topic = f"bench-http-{suffix}"
        phases = set(args.phases)
        result: dict[str, Any] = {"seconds": args.seconds, "connections": args.connections,
                                  "phases": sorted(phases, key=PHASES.index)}  # fmt: skip
        if "batch" in phases:
            asyncio.run(_publish_load(port, topic, BATCH, 1.0, args.connections))  # warm-up
            batched = asyncio.run(_publish_load(port, topic, BATCH, args.seconds, args.connections))
            alone_topic = f"bench-alone-{suffix}"  # created as iot-api creates them (no auto)
            asyncio.run(_publish_load(port, alone_topic, 1, 0.2, 1))
            alone = producer_alone(bootstrap, alone_topic, args.seconds)
            result["batch_publish_msgs_per_s"] = batched / args.seconds
            result["producer_alone_msgs_per_s"] = alone
            result["batch_publish_ratio_to_producer"] = batched / args.seconds / alone
        if "single" in phases:
            single = asyncio.run(_publish_load(port, topic, 1, args.seconds, args.connections))
            result["single_publish_requests_per_s"] = single / args.seconds
        if "consume" in phases:
            # the group is created at the log end, then fed by the producer directly
            ctopic = f"bench-consume-{suffix}"
            asyncio.run(_publish_load(port, ctopic, 1, 0.2, 1))
            asyncio.run(_register(port, ctopic))
            _fill(bootstrap, ctopic, args.consume_messages)
            got, took = asyncio.run(_consume(port, ctopic, args.consume_messages, 120))
            result["long_poll_consume_msgs_per_s"] = got / took if took else 0.0
            result["long_poll_consumed"] = got
        if "latency" in phases:
            lat, sent = asyncio.run(
                _latency(port, f"bench-lat-{suffix}", args.latency_rate, args.seconds)
            )
            result["latency_rate_msgs_per_s"] = args.latency_rate
            result["latency_sent"] = sent  # one connection, one request at a time: may fall short
            result["latency_samples"] = len(lat)
            result["latency_p50_ms"] = percentile(lat, 50)
            result["latency_p99_ms"] = percentile(lat, 99)
        if "memory" in phases:
            ptopic = f"bench-polls-{suffix}"
            asyncio.run(_publish_load(port, ptopic, 1, 0.2, 1))
            result["rss_idle_mib"] = rss_idle
            rss_polls, answered, outcomes = asyncio.run(
                _open_polls(port, ptopic, args.long_polls, server.pid)
            )
            result["long_polls"] = args.long_polls
            result["rss_with_long_polls_mib"] = rss_polls
            result["long_polls_answered_200"] = answered
            result["long_poll_outcomes"] = outcomes
        result["load_average"] = os.getloadavg()
    finally:
        stopping = time.monotonic()
        server.terminate()
        try:
            server.wait(180)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
    # SIGTERM -> exit: closing every consumer the long polls opened
    result["shutdown_s"] = time.monotonic() - stopping
    # what iot-api logged at ERROR (a 500 says why here; the log is in a temporary directory)
    errors = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]
    result["iot_api_errors"] = errors[-5:]
    return result


def _fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = json.dumps(MESSAGE).encode()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kafka-bootstrap", help="an existing Kafka (default: start one)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each load phase")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections")
    parser.add_argument("--consume-messages", type=int, default=50_000, help="phase 3 size")
    parser.add_argument("--latency-rate", type=float, default=200.0, help="phase 4 msgs/s")
    parser.add_argument("--long-polls", type=int, default=1000, help="phase 5 open polls")
    parser.add_argument("--out-dir", type=Path, help="append the result to http.jsonl here")
    parser.add_argument(
        "--phases", nargs="+", choices=PHASES, default=list(PHASES), help="phases to run"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        if args.kafka_bootstrap:
            result = run(args.kafka_bootstrap, args, Path(tmp) / "iot-api.log")
        else:
            from bench.commands.stack_setup import own_stack  # the launcher only when needed

            with own_stack(Path(tmp) / "stack", partitions=3) as servers:
                result = run(servers.bootstrap, args, Path(tmp) / "iot-api.log")
    result["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(result, indent=2))
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        with (args.out_dir / "http.jsonl").open("a") as out:
            out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
