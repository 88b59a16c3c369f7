"""Command round trip benchmark: ``python -m bench.commands_rtt``.

What runs (all on loopback, all bounded in time):

1. Mosquitto + Kafka: its own private stack on free ports (or ``--mqtt-port`` and
   ``--kafka-bootstrap`` of servers you run), fresh topics for this run.
2. ``iot-bridge`` as a subprocess with the command path enabled (the real deployment).
3. ``iot-sim run``: ``--devices`` online simulated devices (gmqtt), answering commands at once
   and sending telemetry at ``--telemetry-rate`` messages/s in total through the same bridge.
4. This process writes commands to ``iot.commands`` at ``--rate`` per second for
   ``--duration`` seconds, spread over the devices, and follows ``iot.command-status``.

Round trip = from just before the command is handed to the Kafka producer to the moment this
process reads the command's ``succeeded`` status from Kafka: Kafka -> bridge -> Mosquitto ->
device -> Mosquitto -> bridge -> Kafka -> reader. Prints p50/p90/p99/max and the completed
commands per second; ``--out FILE`` also writes the result as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bridge.commands.client import CommandClient
from bridge.commands.model import State, decode_status
from bridge.stack.ports import free_port
from bridge.stack.topics import TopicSpec, ensure_topics

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    devices: int
    telemetry_rate: float
    target_rate: float
    duration_s: float
    sent: int
    succeeded: int
    other_final: dict[str, int]
    missing: int
    completed_per_s: float
    rtt_ms_p50: float
    rtt_ms_p90: float
    rtt_ms_p99: float
    rtt_ms_max: float
    telemetry_in_kafka: int
    stages_ms: dict[str, float]
    bridge_cpu_s: float | None


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


@contextlib.contextmanager
def own_stack(data_dir: Path, partitions: int) -> Iterator[tuple[str, int, str]]:
    from bridge.stack.config import StackConfig
    from bridge.stack.launcher import Stack

    cfg = StackConfig(
        data_dir=data_dir,
        mqtt_port=free_port(),
        kafka_port=free_port(),
        kafka_controller_port=free_port(),
        partitions=partitions,
        kafka_heap="768m",
        with_bridge=False,
        with_analytics=False,
    )
    stack = Stack(cfg)
    stack.up()
    try:
        yield stack.mqtt_host, stack.mqtt_port, stack.kafka_bootstrap
    finally:
        stack.down()


def wait_http_ready(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"iot-bridge exited with {proc.returncode}")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp,
        ):
            if resp.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError("iot-bridge not ready in time")


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def telemetry_count(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        total = 0
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def run(args: argparse.Namespace, mqtt_host: str, mqtt_port: int, bootstrap: str) -> Result:
    tag = uuid.uuid4().hex[:8]
    topics = {
        "topic_telemetry": f"bench.telemetry.{tag}",
        "topic_events": f"bench.events.{tag}",
        "topic_dlq": f"bench.dlq.{tag}",
        "topic_presence": f"bench.presence.{tag}",
        "topic_commands": f"bench.commands.{tag}",
        "topic_command_status": f"bench.command-status.{tag}",
        "topic_command_replies": f"bench.command-replies.{tag}",
        "topic_commands_dlq": f"bench.commands-dlq.{tag}",
    }
    compacted = {"topic_presence", "topic_command_status"}
    ensure_topics(
        bootstrap,
        [TopicSpec(name, compacted=key in compacted) for key, name in topics.items()],
        args.partitions,
    )
    http_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    settings: dict[str, Any] = {
        "mqtt_host": mqtt_host,
        "mqtt_port": mqtt_port,
        "kafka_bootstrap": bootstrap,
        "mqtt_client_id": f"bench-bridge-{tag}",
        "command_mqtt_client_id": f"bench-cmd-{tag}",
        "command_group_id": f"bench-cmd-{tag}",
        "commands_enabled": "1",
        # no session outlives the run: a dead bridge's persistent session would keep queueing
        # all telemetry in Mosquitto (and its autosave would write it every few seconds)
        "mqtt_session_expiry_s": 0,
        "command_timeout_ms": 30000,
        "http_port": http_port,
        "log_format": "json",
        "log_level": "WARNING",
        **topics,
    }
    env.update({"IOT_" + k.upper(): str(v) for k, v in settings.items()})
    workdir = Path(tempfile.mkdtemp(prefix="cmd-rtt-"))
    bridge_log = (workdir / "bridge.log").open("wb")
    bridge = subprocess.Popen(
        [sys.executable, "-m", "bridge.cli"],
        cwd=ROOT,
        env=env,
        stdout=bridge_log,
        stderr=subprocess.STDOUT,
    )
    sim: subprocess.Popen[bytes] | None = None
    client = CommandClient(
        bootstrap,
        topic_commands=topics["topic_commands"],
        topic_status=topics["topic_command_status"],
        topic_replies=topics["topic_command_replies"],
        linger_ms=1,
    )
    try:
        wait_http_ready(http_port, bridge, 90)
        prefix = f"rtt{tag}"
        total_time = args.duration + args.warmup_timeout + args.warmup_load + 60
        sim_env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
        sim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "device_sim.cli",
                "run",
                "--devices",
                str(args.devices),
                "--rate",
                str(args.telemetry_rate / args.devices),
                "--duration",
                str(total_time),
                "--reply-latency-ms",
                "0",
                "--device-prefix",
                prefix,
                "--groups",
                "1",
                "--connect-rate",
                "1000",
                "--session-expiry-s",
                "0",
                "--no-progress",
                "--no-offsets",
                "--mqtt-host",
                mqtt_host,
                "--mqtt-port",
                str(mqtt_port),
                "--kafka-bootstrap",
                bootstrap,
                "--topic-telemetry",
                topics["topic_telemetry"],
                "--topic-dlq",
                topics["topic_dlq"],
                "--runs-dir",
                str(workdir / "runs"),
                "--processes",
                str(args.sim_processes),
            ],
            cwd=ROOT,
            env=sim_env,
            stdout=subprocess.DEVNULL,
            stderr=(workdir / "sim.log").open("wb"),
        )
        devices = [f"{prefix}-{i:05d}" for i in range(args.devices)]
        tail = client.tail_status()
        # warm-up: every device answers (all connected, bridge consuming), not measured
        warm_ids = {client.send(d, "ping", {}, flush=False) for d in devices}
        client.flush()
        pending = set(warm_ids)
        deadline = time.monotonic() + args.warmup_timeout
        while pending and time.monotonic() < deadline:
            for msg in tail.poll(0.2):
                status = decode_status(msg.key(), msg.value())
                if status is not None and status.final:
                    pending.discard(status.command_id)
            if sim.poll() is not None:
                raise RuntimeError(
                    f"iot-sim exited early: {(workdir / 'sim.log').read_text()[-2000:]}"
                )
        if pending:
            # a device that missed its warm-up command connected late: resend once
            raise RuntimeError(f"{len(pending)} devices did not answer the warm-up commands")
        print(f"warm-up done: {len(devices)} devices answer", file=sys.stderr)

        sent_at: dict[str, float] = {}
        finals: dict[str, tuple[State, float]] = {}
        marks: dict[str, dict[str, int]] = {}

        def observe(msgs: list[Any]) -> None:
            seen = time.time()
            for msg in msgs:
                status = decode_status(msg.key(), msg.value())
                if status is None or status.command_id not in sent_at:
                    continue
                marks.setdefault(status.command_id, {}).setdefault(status.state.value, status.at)
                if status.final:
                    finals[status.command_id] = (status.state, seen)

        interval = 0.01
        per_tick = args.rate * interval
        i = 0

        def drive(seconds: float, record: bool) -> None:
            """Send at ``--rate`` for ``seconds``; only recorded commands are measured."""
            nonlocal i
            credit = 0.0
            next_tick = time.monotonic()
            end_send = next_tick + seconds
            while time.monotonic() < end_send:
                now = time.monotonic()
                if now >= next_tick:
                    credit += per_tick
                    while credit >= 1:
                        cid = uuid.uuid4().hex
                        if record:
                            sent_at[cid] = time.time()
                        client.send(
                            devices[i % len(devices)], "set", {"i": i}, command_id=cid, flush=False
                        )
                        i += 1
                        credit -= 1
                    next_tick += interval
                observe(tail.poll(0))
                pause = next_tick - time.monotonic()
                if pause > 0:
                    observe(tail.poll(min(pause, interval)))

        # Load warm-up, not measured: the same rate for --warmup-load seconds, so that Kafka's
        # JIT compiler (a fresh broker's C2 thread took ~70% of a core for the first ~30 s)
        # and every cache are past their start-up before the measured window.
        if args.warmup_load > 0:
            drive(args.warmup_load, record=False)
            print(
                f"load warm-up done: {args.warmup_load:.0f}s at {args.rate:.0f}/s", file=sys.stderr
            )
        telemetry_before = telemetry_count(bootstrap, topics["topic_telemetry"])
        cpu_before = cpu_seconds(bridge.pid)
        started_wall = time.time()
        drive(args.duration, record=True)
        client.flush()
        send_end = time.time()
        drain_deadline = time.monotonic() + args.drain_timeout
        while len(finals) < len(sent_at) and time.monotonic() < drain_deadline:
            observe(tail.poll(0.05))
        last_final = max((t for _, t in finals.values()), default=send_end)
        cpu_after = cpu_seconds(bridge.pid)
        telemetry_after = telemetry_count(bootstrap, topics["topic_telemetry"])
        tail.close()

        rtts = sorted(
            (seen - sent_at[cid]) * 1000
            for cid, (state, seen) in finals.items()
            if state is State.SUCCEEDED
        )

        def stage(first: str, second: str, q: float = 0.5) -> float:
            values = sorted(
                m[second] - m[first] for m in marks.values() if first in m and second in m
            )
            return percentile([float(v) for v in values], q)

        to_bridge = sorted(
            float(m["accepted"] - sent_at[cid] * 1000)
            for cid, m in marks.items()
            if "accepted" in m
        )
        from_bridge = sorted(
            seen * 1000 - marks[cid]["succeeded"]
            for cid, (state, seen) in finals.items()
            if "succeeded" in marks.get(cid, {})
        )
        breakdown = {
            "kafka_to_bridge_p50": percentile(to_bridge, 0.5),
            "kafka_to_bridge_p99": percentile(to_bridge, 0.99),
            "accepted_to_sent_p50": stage("accepted", "sent"),
            "sent_to_delivered_p50": stage("sent", "delivered"),
            "sent_to_delivered_p99": stage("sent", "delivered", 0.99),
            "sent_to_succeeded_p50": stage("sent", "succeeded"),
            "sent_to_succeeded_p99": stage("sent", "succeeded", 0.99),
            "status_to_reader_p50": percentile(from_bridge, 0.5),
            "status_to_reader_p99": percentile(from_bridge, 0.99),
        }
        other: dict[str, int] = {}
        for state, _ in finals.values():
            if state is not State.SUCCEEDED:
                other[state.value] = other.get(state.value, 0) + 1
        return Result(
            devices=args.devices,
            telemetry_rate=args.telemetry_rate,
            target_rate=args.rate,
            duration_s=args.duration,
            sent=len(sent_at),
            succeeded=len(rtts),
            other_final=other,
            missing=len(sent_at) - len(finals),
            completed_per_s=len(finals) / max(1e-9, last_final - started_wall),
            rtt_ms_p50=percentile(rtts, 0.50),
            rtt_ms_p90=percentile(rtts, 0.90),
            rtt_ms_p99=percentile(rtts, 0.99),
            rtt_ms_max=rtts[-1] if rtts else float("nan"),
            telemetry_in_kafka=telemetry_after - telemetry_before,
            stages_ms=breakdown,
            bridge_cpu_s=(
                cpu_after - cpu_before if cpu_after is not None and cpu_before is not None else None
            ),
        )
    finally:
        client.close()
        if sim is not None and sim.poll() is None:
            sim.send_signal(signal.SIGINT)
            try:
                sim.wait(30)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
        if bridge.poll() is None:
            bridge.send_signal(signal.SIGTERM)
            try:
                bridge.wait(60)
            except subprocess.TimeoutExpired:
                bridge.kill()
                bridge.wait()
        bridge_log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.commands_rtt", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--devices", type=int, default=1000, help="online simulated devices (1000)")
    parser.add_argument("--rate", type=float, default=1000.0, help="commands per second (1000)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of sending (10)")
    parser.add_argument(
        "--telemetry-rate",
        type=float,
        default=5000.0,
        help="telemetry messages/s of the whole fleet through the bridge meanwhile (5000)",
    )
    parser.add_argument("--partitions", type=int, default=12, help="partitions per topic (12)")
    parser.add_argument("--sim-processes", type=int, default=1, help="iot-sim processes (1)")
    parser.add_argument(
        "--warmup-timeout", type=float, default=60.0, help="seconds for every device to answer once"
    )
    parser.add_argument(
        "--warmup-load",
        type=float,
        default=15.0,
        help="seconds of commands at --rate before the measured window, not measured (15)",
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=30.0, help="seconds to wait for the last statuses"
    )
    parser.add_argument(
        "--mqtt-port", type=int, default=None, help="use this Mosquitto (127.0.0.1)"
    )
    parser.add_argument("--kafka-bootstrap", default=None, help="use this Kafka")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0 or args.devices < 1:
        parser.error("--rate, --duration and --devices must be positive")
    if args.mqtt_port is not None and args.kafka_bootstrap:
        result = run(args, "127.0.0.1", args.mqtt_port, args.kafka_bootstrap)
    else:
        with (
            tempfile.TemporaryDirectory(prefix="cmd-rtt-stack-") as tmp,
            own_stack(Path(tmp), args.partitions) as (host, port, bootstrap),
        ):
            result = run(args, host, port, bootstrap)
    doc = asdict(result)
    print(json.dumps(doc, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if result.missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
