"""The publisher load: several processes, raw-socket MQTT 3.1.1, one connection per device.

Each process owns a slice of the devices. A send step builds the due messages (paced by a total
rate, or as fast as the window allows), joins each connection's packets into one write and reads
back PUBACKs. The end-to-end *window* (published minus delivered, delivered being reported by the
orchestrator from the sink side) bounds the backlog, so a slow contender is measured at its own
pace instead of overflowing Mosquitto's queue, and the drain after the run stays short.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.synchronize as mps
import queue
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

import mqtt_codec as codec
from bench.payload import PayloadMaker, device_id, telemetry_topic
from bench.workers import kill_workers, raise_fd_limit, spawn_workers

_MAX_STEP = 2000  # messages built per send step and process
_IDLE_S = 0.0005


class LoadError(Exception):
    """The load generator could not connect or publish."""


@dataclass(frozen=True)
class LoadSpec:
    host: str
    port: int
    devices: int
    payload_bytes: int
    qos: int
    duration_s: float
    rate: float | None = None  # total msgs/s; None = as fast as the window allows
    window: int = 10_000
    processes: int = 2
    connections: int | None = None  # None = one per device


@dataclass
class LoadReport:
    published: int
    acked: int
    per_device: dict[str, int]
    started_at: float  # wall clock (time.time()) of the first send step
    ended_at: float


def _connect(host: str, port: int, client_id: str) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(
        codec.encode_connect(
            client_id, keepalive=0, clean_start=True, protocol_level=codec.MQTT_3_1_1
        )
    )
    reader = codec.StreamReader()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        data = sock.recv(4096)
        if not data:
            raise LoadError(f"{client_id}: connection closed before CONNACK")
        for packet in reader.feed(data):
            if packet.kind == codec.CONNACK:
                code = codec.decode_connack(packet.body).reason
                if code != 0:
                    raise LoadError(f"{client_id}: CONNACK refused, code {code}")
                return sock
    raise LoadError(f"{client_id}: no CONNACK within 10 s")


def _worker(
    *,
    index: int,
    spec: LoadSpec,
    published: Any,  # mp.Array("q") per process
    acked: Any,  # mp.Array("q") per process: PUBACKs received (QoS 1)
    delivered: Any,  # mp.Value("q"), written by the orchestrator
    ready: Any,  # mp.Queue
    go: mps.Event,
    stop: mps.Event,
    results: Any,  # mp.Queue
) -> None:
    try:
        raise_fd_limit()
        procs = spec.processes
        my_devices = [device_id(i) for i in range(index, spec.devices, procs)]
        total_conns = spec.connections or spec.devices
        my_conns = max(1, len(range(index, total_conns, procs)))
        my_conns = min(my_conns, len(my_devices))
        socks = [
            _connect(spec.host, spec.port, f"bench-load-{index}-{c}-{time.time_ns()}")
            for c in range(my_conns)
        ]
        for s in socks:
            s.setblocking(True)
            s.settimeout(None)
        sel = selectors.DefaultSelector()
        for c, s in enumerate(socks):
            sel.register(s, selectors.EVENT_READ, c)
        makers = [PayloadMaker(d, spec.payload_bytes) for d in my_devices]
        heads = [
            codec.publish_head(telemetry_topic(d), spec.qos, spec.payload_bytes) for d in my_devices
        ]
        conn_of = [i % my_conns for i in range(len(my_devices))]
        seqs = [0] * len(my_devices)
        packet_ids = [0] * my_conns
        ack_bytes = 0
        qos = spec.qos
        pack = struct.Struct("!H").pack
        rate_w = spec.rate / procs if spec.rate else None
        window = spec.window
        ready.put(index)
        go.wait()
        sent = 0
        cursor = 0
        ndev = len(my_devices)
        started = time.time()
        t0 = time.monotonic()
        deadline = t0 + spec.duration_s
        while not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            allowed = _MAX_STEP
            if rate_w is not None:
                allowed = min(allowed, int(rate_w * (now - t0)) - sent)
            outstanding = sum(published[:]) - delivered.value
            allowed = min(allowed, (window - outstanding) // procs)
            if allowed > 0:
                ts = time.time_ns() // 1_000_000
                batches: dict[int, list[bytes]] = {}
                for _ in range(allowed):
                    i = cursor
                    cursor = cursor + 1 if cursor + 1 < ndev else 0
                    payload = makers[i].make(ts, seqs[i])
                    seqs[i] += 1
                    c = conn_of[i]
                    if qos:
                        pid = packet_ids[c] % 65535 + 1
                        packet_ids[c] = pid
                        packet = heads[i] + pack(pid) + payload
                    else:
                        packet = heads[i] + payload
                    batch = batches.get(c)
                    if batch is None:
                        batches[c] = [packet]
                    else:
                        batch.append(packet)
                for c, packets in batches.items():
                    socks[c].sendall(b"".join(packets))
                sent += allowed
                published[index] = sent
            else:
                time.sleep(_IDLE_S)
            for key, _ in sel.select(0):
                data = socks[key.data].recv(1 << 16)
                if not data:
                    raise LoadError("Mosquitto closed a publisher connection")
                ack_bytes += len(data)
            acked[index] = ack_bytes // 4
        ended = time.time()
        # QoS 1: wait for Mosquitto to acknowledge everything (it then holds every message)
        ack_deadline = time.monotonic() + 60
        while qos and ack_bytes // 4 < sent and time.monotonic() < ack_deadline:
            for key, _ in sel.select(0.05):
                data = socks[key.data].recv(1 << 16)
                if not data:
                    raise LoadError("Mosquitto closed a publisher connection")
                ack_bytes += len(data)
            acked[index] = ack_bytes // 4
        for s in socks:
            with contextlib.suppress(OSError):
                s.sendall(codec.DISCONNECT_NORMAL)
                s.close()
        results.put(
            (
                index,
                None,
                sent,
                ack_bytes // 4 if qos else sent,
                dict(zip(my_devices, seqs, strict=True)),
                started,
                ended,
            )
        )
    except Exception as exc:  # noqa: BLE001 - any failure goes to the orchestrator, not a hang
        ready.put(index)
        results.put((index, f"{type(exc).__name__}: {exc}", 0, 0, {}, 0.0, 0.0))


class LoadGenerator:
    """Starts the publisher processes connected and idle; :meth:`go` starts publishing."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self.published = ctx.Array("q", spec.processes, lock=False)
        self.acked = ctx.Array("q", spec.processes, lock=False)
        self.delivered = ctx.Value("q", 0, lock=False)
        self._ready: Any = ctx.Queue()
        self._results: Any = ctx.Queue()
        self._go = ctx.Event()
        self._stop = ctx.Event()
        self._procs: list[Any] = []

    def start(self, timeout: float = 120.0) -> None:
        """Spawn the processes and wait until every connection is open."""
        self._procs = spawn_workers(
            self._ctx,
            _worker,
            self.spec.processes,
            spec=self.spec,
            published=self.published,
            acked=self.acked,
            delivered=self.delivered,
            ready=self._ready,
            go=self._go,
            stop=self._stop,
            results=self._results,
        )
        for _ in range(self.spec.processes):
            try:
                self._ready.get(timeout=timeout)
            except queue.Empty as exc:
                self.kill()
                raise LoadError("publisher processes did not connect in time") from exc

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def go(self) -> None:
        self._go.set()

    def total_published(self) -> int:
        return int(sum(self.published[:]))

    def total_acked(self) -> int:
        """PUBACKs received so far (QoS 1): messages Mosquitto has taken."""
        return int(sum(self.acked[:]))

    def set_delivered(self, n: int) -> None:
        self.delivered.value = n

    def stop(self) -> None:
        self._stop.set()

    def finish(self, timeout: float = 120.0) -> LoadReport:
        """Wait for every process's report (after its duration or :meth:`stop`)."""
        per_device: dict[str, int] = {}
        published = acked = 0
        started = float("inf")
        ended = 0.0
        errors: list[str] = []
        for _ in range(self.spec.processes):
            try:
                _i, err, sent, acks, counts, t_start, t_end = self._results.get(timeout=timeout)
            except queue.Empty:
                errors.append("a publisher process did not report")
                continue
            if err:
                errors.append(err)
                continue
            published += sent
            acked += acks
            per_device.update(counts)
            started = min(started, t_start)
            ended = max(ended, t_end)
        for p in self._procs:
            p.join(timeout=10)
        self.kill()
        if errors:
            raise LoadError("; ".join(errors))
        return LoadReport(published, acked, per_device, started, ended)

    def kill(self) -> None:
        kill_workers(self._procs)
