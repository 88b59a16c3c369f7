"""`make bench-amqp`: devices uploading telemetry over AMQP 1.0 into Kafka (issue 34, item 6).

One Kafka (own, on free ports, unless ``--kafka-bootstrap``), one `iot-amqp` process
(``--insecure-anonymous``: the door's cost per message, not the log-in; devices then name
themselves in the address, ``telemetry/{tenant}/{device}``). The load comes from
``--generators`` processes of python-qpid-proton's own client (the independent client the
tests use), each with ``--connections`` device connections sending 1 KiB JSON readings
**unsettled**: a message counts once iot-amqp answered `accepted`, which it does only after
Kafka acknowledged it (docs/amqp.md). Two phases per run:

1. **max**: every link sends as fast as its credit allows for ``--seconds``; msgs/s accepted,
   and iot-amqp's CPU seconds per million messages (from /proc, its own process);
2. **half**: the same connections paced to half of phase 1's rate; p50/p99 of the time from a
   message's send to its `accepted` (i.e. publish -> Kafka acknowledged, as a device sees it).

    python -m bench.amqp_upload --runs 3 --out-dir bench/results

On a 2-core machine the generators and iot-amqp share the cores: the rate is the pair's, and
CPU per message (iot-amqp's alone) is the figure that carries to a bigger machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from bench.amqp_cmd import command_phase
from bench.amqp_cmd_model import CommandSettings
from bench.amqp_north import receive_phase
from bench.http_api import percentile, wait_ready
from bench.machine import machine_info
from stack.ports import free_port

PAD = 1024 - 60  # a reading of about 1 KiB as compact JSON
TENANT = "default"
SETTINGS = ("seconds", "generators", "connections", "runs", "north_messages", "north_credit",
            "command_devices", "command_rate", "command_seconds", "command_timeout_s",
            "only_commands")  # fmt: skip
TOPIC = "iot.telemetry"  # the default tenant's telemetry (bridge.mapping.tenant_topics)


def reading(seq: int) -> bytes:
    body = {"ts": int(time.time() * 1000), "seq": seq, "metrics": {"t": 20.0}, "pad": "x" * PAD}
    return json.dumps(body, separators=(",", ":")).encode()


def _tag(delivery: Any) -> str:
    tag = delivery.tag
    return tag.decode() if isinstance(tag, bytes) else str(tag)


class _Uploader(MessagingHandler):
    """``connections`` devices, each a connection with one sender link, sending unsettled
    readings until ``deadline``; ``rate`` msgs/s in all (0: as fast as credit allows)."""

    def __init__(self, url: str, first: int, connections: int, seconds: float, rate: float):
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.first, self.connections = url, first, connections
        self.seconds, self.rate = seconds, rate
        self.accepted = self.refused = 0
        self.accepted_all = 0  # after the deadline too (what the server did in the phase)
        self.latencies_ms: list[float] = []
        self._sent_at: dict[str, float] = {}  # by delivery tag (proton's wrappers are not stable)
        self._seq = 0
        self._senders: list[Any] = []
        self._start = self._deadline = 0.0

    def on_start(self, event: Any) -> None:
        for i in range(self.first, self.first + self.connections):
            conn = event.container.connect(self.url, allowed_mechs="ANONYMOUS")
            self._senders.append(event.container.create_sender(conn, f"telemetry/{TENANT}/d{i}"))
        self._start = time.monotonic()
        self._deadline = self._start + self.seconds
        if self.rate:
            event.container.schedule(0.01, self)
        # a busy machine may attach the links only after the deadline: nothing is sent then,
        # and no outcome would ever end the run
        event.container.schedule(self.seconds + 0.5, _AtDeadline(self))

    def _due(self) -> int:
        """Messages the paced phase should have sent by now, less those sent."""
        return int((time.monotonic() - self._start) * self.rate) - self._seq

    def _send(self, sender: Any) -> None:
        self._seq += 1
        tag = str(self._seq)
        sender.send(Message(body=reading(self._seq), inferred=True), tag=tag)
        self._sent_at[tag] = time.monotonic()

    def on_sendable(self, event: Any) -> None:
        if self.rate or time.monotonic() >= self._deadline:
            return
        while event.sender.credit > 0:
            self._send(event.sender)

    def on_timer_task(self, event: Any) -> None:  # the paced phase's clock, every 10 ms
        if time.monotonic() >= self._deadline:
            return
        due = self._due()
        for sender in self._senders:
            if due <= 0:
                break
            while due > 0 and sender.credit > 0:
                self._send(sender)
                due -= 1
        event.container.schedule(0.01, self)

    def on_accepted(self, event: Any) -> None:
        self.accepted_all += 1
        sent = self._sent_at.pop(_tag(event.delivery), None)
        if sent is not None and time.monotonic() <= self._deadline:
            self.accepted += 1
            self.latencies_ms.append((time.monotonic() - sent) * 1000)
        self._maybe_done(event)

    def on_rejected(self, event: Any) -> None:
        self.refused += 1
        self._sent_at.pop(_tag(event.delivery), None)
        self._maybe_done(event)

    on_released = on_rejected
    on_modified = on_rejected

    def _maybe_done(self, _event: Any) -> None:
        if time.monotonic() >= self._deadline and not self._sent_at:
            for sender in self._senders:
                sender.connection.close()


class _AtDeadline:
    """Ends an uploader's run at its deadline if nothing it sent is still open."""

    def __init__(self, uploader: _Uploader) -> None:
        self.uploader = uploader

    def on_timer_task(self, event: Any) -> None:
        self.uploader._maybe_done(event)


def _generator(url: str, plan: tuple[int, int, float, float], out: Any) -> None:
    """One load process: ``plan`` = (first device, connections, seconds, rate)."""
    handler = _Uploader(url, *plan)
    Container(handler).run()
    out.send({"accepted": handler.accepted, "refused": handler.refused,
              "accepted_all": handler.accepted_all,
              "latencies_ms": handler.latencies_ms})  # fmt: skip


def phase(url: str, args: argparse.Namespace, rate: float) -> dict[str, Any]:
    """Run the generators side by side; their summed counts and latencies."""
    pipes, procs = [], []
    ctx = multiprocessing.get_context("spawn")
    for g in range(args.generators):
        mine, theirs = ctx.Pipe(duplex=False)
        per_gen_rate = rate / args.generators
        proc = ctx.Process(
            target=_generator,
            args=(
                url,
                (g * args.connections, args.connections, args.seconds, per_gen_rate),
                theirs,
            ),
        )
        proc.start()
        pipes.append(mine)
        procs.append(proc)
    results = [pipe.recv() for pipe in pipes]
    for proc in procs:
        proc.join(60)
    latencies = [ms for r in results for ms in r["latencies_ms"]]
    return {
        "accepted": sum(r["accepted"] for r in results),
        "accepted_all": sum(r["accepted_all"] for r in results),
        "refused": sum(r["refused"] for r in results),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(
    bootstrap: str, args: argparse.Namespace, log: Path, mqtt: tuple[str, int] | None
) -> dict[str, Any]:
    """The upload and northbound phases (unless ``--only-commands``), then the command phase
    when there is a Mosquitto (``mqtt``)."""
    result = {} if args.only_commands else _upload_run(bootstrap, args, log)
    if mqtt is not None:
        result.update(command_phase(bootstrap, mqtt, command_settings(args), log.parent))
    return {**result, "load_average": os.getloadavg()}


@contextlib.contextmanager
def amqp_server(bootstrap: str, log: Path, root: Path | None = None) -> Iterator[tuple[str, int]]:
    """An ``iot-amqp --insecure-anonymous`` on free ports, ready: (its AMQP url, its pid).
    ``root``: another checkout of the project whose code it runs (first on PYTHONPATH)."""
    port, http = free_port(), free_port()
    argv = [sys.executable, "-m", "amqp", "--insecure-anonymous", "--no-registry-auth",
            "--log-level", "WARNING", "--kafka-bootstrap", bootstrap,
            "--amqp-port", str(port), "--amqps-port", "0", "--http-port", str(http)]  # fmt: skip
    with log.open("w") as out:
        env = None if root is None else {**os.environ, "PYTHONPATH": str(root)}
        # in the checkout itself: ``-m`` puts the working directory first on sys.path
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        wait_ready(f"http://127.0.0.1:{http}/readyz")
        yield f"amqp://127.0.0.1:{port}", server.pid
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


def _upload_run(bootstrap: str, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    with amqp_server(bootstrap, log) as (url, pid):
        warm = argparse.Namespace(**{**vars(args), "seconds": 1.0})
        phase(url, warm, 0)  # connections, topic metadata, the JIT-free warm-up of caches
        cpu0 = cpu_s(pid)
        full = phase(url, args, 0)
        cpu = cpu_s(pid) - cpu0
        rate = full["accepted"] / args.seconds
        half = phase(url, args, rate / 2)
        north = receive_phase(
            url, bootstrap, topic=TOPIC, tenant=TENANT, count=args.north_messages,
            credit=args.north_credit, cpu=lambda: cpu_s(pid), reading=reading,
        )  # fmt: skip
        return {
            "max_msgs_per_s": rate,
            "max_refused": full["refused"],
            # every accepted message of the phase: the CPU counts the drain after its end too
            "server_cpu_s_per_million": cpu / full["accepted_all"] * 1e6
            if full["accepted_all"]
            else 0,
            "max_p50_ms": full["p50_ms"],
            "max_p99_ms": full["p99_ms"],
            "half_rate_msgs_per_s": half["accepted"] / args.seconds,
            "half_p50_ms": half["p50_ms"],
            "half_p99_ms": half["p99_ms"],
            **north,
        }


def command_settings(args: argparse.Namespace) -> CommandSettings:
    return CommandSettings(
        devices=args.command_devices, rate=args.command_rate, seconds=args.command_seconds,
        timeout_s=args.command_timeout_s,
    )  # fmt: skip


def runs(
    bootstrap: str, args: argparse.Namespace, tmp: Path, mqtt: tuple[str, int] | None
) -> list[dict[str, Any]]:
    done = []
    for i in range(args.runs):
        result = one_run(bootstrap, args, tmp / f"iot-amqp-{i}.log", mqtt)
        print(json.dumps(result), flush=True)
        done.append(result)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kafka-bootstrap", help="an existing Kafka (default: start one)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--generators", type=int, default=2, help="load processes")
    parser.add_argument("--connections", type=int, default=8, help="devices per generator")
    parser.add_argument("--runs", type=int, default=3, help="runs (ranges are reported)")
    parser.add_argument("--north-messages", type=int, default=50_000,
                        help="records the northbound phase reads")  # fmt: skip
    parser.add_argument("--north-credit", type=int, default=500,
                        help="the northbound receiver's credit")  # fmt: skip
    parser.add_argument("--command-devices", type=int, default=20,
                        help="command phase: AMQP devices, each with its own log-in")  # fmt: skip
    parser.add_argument("--command-rate", type=float, default=50.0,
                        help="command phase: commands/s the application sends")  # fmt: skip
    parser.add_argument("--command-seconds", type=float, default=20.0,
                        help="command phase: how long it sends")  # fmt: skip
    parser.add_argument("--command-timeout-s", type=float, default=35.0,
                        help="command phase: a reply not back this long after the last send "
                        "is lost")  # fmt: skip
    parser.add_argument("--mqtt-host", default="127.0.0.1",
                        help="with --kafka-bootstrap: the (anonymous) Mosquitto")  # fmt: skip
    parser.add_argument("--mqtt-port", type=int,
                        help="with --kafka-bootstrap: the command phase's Mosquitto (none: "
                        "no command phase)")  # fmt: skip
    parser.add_argument("--only-commands", action="store_true",
                        help="only the command phase")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, help="append the results to amqp.jsonl here")
    args = parser.parse_args(argv)
    if min(args.seconds, args.generators, args.connections, args.runs, args.north_messages,
           args.north_credit) <= 0:  # fmt: skip
        parser.error("--seconds, --generators, --connections, --runs, --north-messages and "
                     "--north-credit must be > 0")  # fmt: skip
    for problem in command_settings(args).problems():
        parser.error(problem)
    if args.only_commands and args.kafka_bootstrap and args.mqtt_port is None:
        parser.error("--only-commands with --kafka-bootstrap needs --mqtt-port")
    with tempfile.TemporaryDirectory(prefix="bench-amqp-") as tmp:
        if args.kafka_bootstrap:
            mqtt = None if args.mqtt_port is None else (args.mqtt_host, args.mqtt_port)
            results = runs(args.kafka_bootstrap, args, Path(tmp), mqtt)
        else:
            # the launcher only here: the load processes import this module too
            from bench.commands.stack_setup import own_stack

            with own_stack(Path(tmp) / "stack", partitions=3) as servers:
                mqtt = (servers.mqtt_host, servers.mqtt_port)
                results = runs(servers.bootstrap, args, Path(tmp), mqtt)
    summary = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        "settings": {k: vars(args)[k] for k in SETTINGS},
        "runs": results,
    }
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        with (args.out_dir / "amqp.jsonl").open("a") as out:
            out.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
