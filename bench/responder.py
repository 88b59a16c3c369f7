"""Cheap command-answering devices for the command benchmark: ``python -m bench.responder``.

N devices, each its own MQTT 5 connection on a raw socket (clean start, session expiry 0),
spread over a few processes that each serve their sockets with one selector. A device
subscribes ``devices/{id}/commands/+`` at QoS 1 and, for every command PUBLISH, writes the
PUBACK and its reply PUBLISH (QoS 1, to the command's Response Topic, else
``devices/{id}/replies/{command_id}``, ``{"status": "ok", "result": {...}}``) in one socket
write. It reads and counts Mosquitto's PUBACKs of the replies. A few microseconds of Python per
command, where the gmqtt simulator spends tens: the load generator must cost less than what it
measures.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import multiprocessing.synchronize as mps
import queue
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

import mqtt_codec as codec
from bench.responder_logic import answer as answer_command
from bench.workers import kill_workers, raise_fd_limit, spawn_workers

_CONNECT_BATCH = 50  # connections opened before waiting for their SUBACKs
# per-process counters in the shared array, in this order
COUNTERS = ("commands", "replies", "reply_acks", "reply_ack_errors", "unanswerable")


class ResponderError(Exception):
    """The responder could not connect, subscribe or keep its connections."""


@dataclass(frozen=True)
class ResponderSpec:
    host: str
    port: int
    devices: list[str]
    processes: int = 1
    receive_maximum: int = 65535
    connect_timeout_s: float = 60.0


def _open(spec: ResponderSpec, devices: list[str]) -> list[socket.socket]:
    """Connect and subscribe every device; returns the sockets once every SUBACK granted QoS 1."""
    socks: list[socket.socket] = []
    deadline = time.monotonic() + spec.connect_timeout_s
    for start in range(0, len(devices), _CONNECT_BATCH):
        batch = devices[start : start + _CONNECT_BATCH]
        sel = selectors.DefaultSelector()
        waiting: dict[int, tuple[str, codec.StreamReader]] = {}
        for dev in batch:
            sock = socket.create_connection((spec.host, spec.port), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # MQTT 5 lets a client send packets right after CONNECT: one write for both
            sock.sendall(
                codec.encode_connect(
                    dev, keepalive=0, clean_start=True, receive_maximum=spec.receive_maximum
                )
                + codec.encode_subscribe(1, (f"devices/{dev}/commands/+",), 1)
            )
            sock.setblocking(False)
            socks.append(sock)
            waiting[sock.fileno()] = (dev, codec.StreamReader())
            sel.register(sock, selectors.EVENT_READ, sock)
        while waiting:
            if time.monotonic() > deadline:
                raise ResponderError(f"{len(waiting)} devices not subscribed in time")
            for key, _ in sel.select(0.5):
                sock = key.data
                dev, reader = waiting[sock.fileno()]
                data = sock.recv(4096)
                if not data:
                    raise ResponderError(f"{dev}: connection closed before SUBACK")
                for packet in reader.feed(data):
                    if packet.kind == codec.CONNACK:
                        code = codec.decode_connack(packet.body).reason
                        if code != 0:
                            raise ResponderError(f"{dev}: CONNACK refused, reason {code}")
                    elif packet.kind == codec.SUBACK:
                        _pid, reasons = codec.decode_suback(packet.body)
                        if reasons != [1]:
                            raise ResponderError(f"{dev}: SUBACK reasons {reasons}")
                        del waiting[sock.fileno()]
                        sel.unregister(sock)
        sel.close()
    return socks


class _Conn:
    __slots__ = ("buf", "device", "next_id", "sock")

    def __init__(self, device: str, sock: socket.socket) -> None:
        self.device = device
        self.sock = sock
        self.buf = bytearray()  # the start of a packet not complete yet
        self.next_id = 0


def serve(
    socks: list[socket.socket],
    devices: list[str],
    counters: Any,  # a writable sequence of len(COUNTERS) ints
    stop: mps.Event | Any,
) -> None:
    """Answer commands until ``stop`` is set (one selector over every socket)."""
    sel = selectors.DefaultSelector()
    conns: list[_Conn] = []
    for i, (dev, sock) in enumerate(zip(devices, socks, strict=True)):
        sock.setblocking(True)
        conns.append(_Conn(dev, sock))
        sel.register(sock, selectors.EVENT_READ, i)
    commands = replies = acks = ack_errors = unanswerable = 0
    answer = answer_command
    parse = codec.parse_publish
    split = codec.split_packets
    publish_kind = codec.PUBLISH
    puback_kind = codec.PUBACK
    while not stop.is_set():
        for key, _ in sel.select(0.05):
            conn = conns[key.data]
            data = conn.sock.recv(1 << 16)
            if not data:
                raise ResponderError(f"{conn.device}: Mosquitto closed the connection")
            buf = conn.buf
            buf += data
            packets, used = split(buf)
            del buf[:used]
            out: list[bytes] = []
            for first, body in packets:
                kind = first >> 4
                if kind == publish_kind:
                    commands += 1
                    conn.next_id = conn.next_id % 65535 + 1
                    ans = answer(conn.device, parse(first, body), conn.next_id)
                    if ans.replied:
                        replies += 1
                    else:
                        unanswerable += 1
                    if ans.data:
                        out.append(ans.data)
                elif kind == puback_kind:
                    acks += 1
                    if codec.decode_puback(body)[1] >= 0x80:
                        ack_errors += 1
                elif kind == codec.DISCONNECT:
                    reason = codec.decode_disconnect_reason(body)
                    raise ResponderError(f"{conn.device}: DISCONNECT from Mosquitto, {reason}")
            if out:
                conn.sock.sendall(b"".join(out))
        counters[0] = commands
        counters[1] = replies
        counters[2] = acks
        counters[3] = ack_errors
        counters[4] = unanswerable
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.sock.sendall(codec.DISCONNECT_NORMAL)
            conn.sock.close()


def _worker(
    *,
    index: int,
    spec: ResponderSpec,
    counters: Any,  # mp.Array("q", processes * len(COUNTERS))
    ready: Any,  # mp.Queue of (index, error or None)
    stop: mps.Event,
) -> None:
    base = index * len(COUNTERS)

    class _Slice:
        def __setitem__(self, i: int, value: int) -> None:
            counters[base + i] = value

    try:
        raise_fd_limit()
        mine = spec.devices[index :: spec.processes]
        socks = _open(spec, mine)
        ready.put((index, None))
    except Exception as exc:  # noqa: BLE001 - reported to the orchestrator, not a hang
        ready.put((index, f"{type(exc).__name__}: {exc}"))
        return
    try:
        serve(socks, mine, _Slice(), stop)
    except Exception as exc:  # noqa: BLE001
        print(f"responder process {index}: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


class Responder:
    """Starts the responder processes; :meth:`start` returns once every device is subscribed."""

    def __init__(self, spec: ResponderSpec) -> None:
        if spec.processes < 1 or not spec.devices:
            raise ValueError("a responder needs at least one process and one device")
        self.spec = spec
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self._counters = ctx.Array("q", spec.processes * len(COUNTERS), lock=False)
        self._ready: Any = ctx.Queue()
        self._stop = ctx.Event()
        self._procs: list[Any] = []

    def start(self, timeout: float | None = None) -> None:
        timeout = timeout if timeout is not None else self.spec.connect_timeout_s + 30
        self._procs = spawn_workers(
            self._ctx,
            _worker,
            self.spec.processes,
            spec=self.spec,
            counters=self._counters,
            ready=self._ready,
            stop=self._stop,
        )
        errors = []
        for _ in self._procs:
            try:
                _i, err = self._ready.get(timeout=timeout)
            except queue.Empty:
                errors.append("a responder process did not connect in time")
                break
            if err:
                errors.append(err)
        if errors:
            self.kill()
            raise ResponderError("; ".join(errors))

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def counts(self) -> dict[str, int]:
        """Totals over the processes: commands read, replies written, their PUBACKs, ..."""
        n = len(COUNTERS)
        values = self._counters[:]
        return {
            name: int(sum(values[i + n * p] for p in range(len(self._procs))))
            for i, name in enumerate(COUNTERS)
        }

    def failed(self) -> str | None:
        """Why a responder process died, or None while all run."""
        for i, p in enumerate(self._procs):
            if p.exitcode not in (None, 0):
                return f"responder process {i} exited with {p.exitcode}"
        return None

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for p in self._procs:
            p.join(timeout)
        self.kill()

    def kill(self) -> None:
        kill_workers(self._procs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.responder", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--devices", type=int, default=1000, help="devices (connections), 1000")
    parser.add_argument(
        "--device-prefix", default="resp", help="device ids are PREFIX-00000, ... (resp)"
    )
    parser.add_argument("--processes", type=int, default=1, help="responder processes (1)")
    parser.add_argument("--mqtt-host", default="127.0.0.1", help="Mosquitto host (127.0.0.1)")
    parser.add_argument("--mqtt-port", type=int, default=1883, help="Mosquitto port (1883)")
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)"
    )
    args = parser.parse_args(argv)
    if args.devices < 1 or args.processes < 1:
        parser.error("--devices and --processes must be positive")
    devices = [f"{args.device_prefix}-{i:05d}" for i in range(args.devices)]
    responder = Responder(
        ResponderSpec(args.mqtt_host, args.mqtt_port, devices, processes=args.processes)
    )
    try:
        responder.start()
    except (ResponderError, OSError) as exc:
        print(f"responder: {exc}", file=sys.stderr)
        return 1
    print(f"{args.devices} devices subscribed", file=sys.stderr, flush=True)
    stopping = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    end = None if args.duration is None else time.monotonic() + args.duration
    failure = None
    while not stopping and (end is None or time.monotonic() < end):
        failure = responder.failed()
        if failure:
            break
        time.sleep(0.2)
    counts = responder.counts()
    responder.stop()
    print(", ".join(f"{k} {v:,}" for k, v in counts.items()), file=sys.stderr)
    if failure:
        print(f"responder: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
