"""One fleet benchmark run: private servers, the bridge, the fleet, the samples, the verdict."""

from __future__ import annotations

import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.commands.errors import BenchError
from bench.commands.processes import start_command_path
from bench.commands.stack_setup import bridge_settings, create_topics, run_topics
from bench.fleet.options import FleetOptions
from bench.fleet.sampler import Sampler, open_files_limit, simulator_pids
from bench.fleet.servers import fleet_servers
from bench.machine import loadavg, machine_info
from bench.progress import say
from device_sim.errors import SimError
from device_sim.fleet import run_fleet
from device_sim.kafka_io import end_offsets
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec
from device_sim.verifier import verify

MOSQUITTO_FD_HEADROOM = 64  # listener, persistence, log, the bridge's own connection
SESSION_EXPIRY_S = 60  # no device session outlives the run for long in Mosquitto
VERIFY_WAIT_S = 60.0
VERIFY_WORKERS = 2  # as `iot-sim verify`: the telemetry partitions read by 2 processes
DRAIN_SAMPLE_S = 5.0
TOPICS_TIMEOUT_S = 180.0
TOPICS_READ = (
    "topic_telemetry",
    "topic_dlq",
    "topic_events",
)  # keep sampling this long after the fleet ended (the bridge drains)


class _Progress:
    """The fleet's merged counters as they stream in, and when the whole fleet was connected."""

    def __init__(self, devices: int) -> None:
        self.devices = devices
        self.latest: dict[str, Any] = {}
        self.started = time.monotonic()
        self.all_connected_s: float | None = None
        self.first_connected_s: float | None = None
        self.peak_connected = 0
        self._last_say = 0.0

    def __call__(self, snap: dict[str, Any]) -> None:
        self.latest = snap
        connected = int(snap.get("connected", 0))
        self.peak_connected = max(self.peak_connected, connected)
        now = time.monotonic()
        if self.first_connected_s is None and connected > 0:
            self.first_connected_s = now - self.started
        if self.all_connected_s is None and connected >= self.devices:
            self.all_connected_s = now - self.started
            say(f"all {self.devices:,} devices connected after {self.all_connected_s:.1f} s")
        if now - self._last_say >= 30:
            self._last_say = now
            say(
                f"  t={now - self.started:.0f}s connected {connected:,} "
                f"published {snap.get('published', 0):,} "
                f"awaiting ack {snap.get('awaiting_ack', 0):,}"
            )


def _wait_for_topics(bootstrap: str, names: list[str]) -> None:
    """New topics reach every broker's metadata a little later (seconds on a loaded machine):
    the bridge exits at start on a topic it cannot see yet."""
    deadline = time.monotonic() + TOPICS_TIMEOUT_S
    while True:
        try:
            end_offsets(bootstrap, names, timeout=5.0)
            return
        except SimError as exc:
            if time.monotonic() > deadline:
                raise BenchError(
                    f"topics not usable after {TOPICS_TIMEOUT_S:.0f} s: {exc}"
                ) from exc
            time.sleep(0.5)


def _check_open_files(pid: int | None, devices: int) -> int | None:
    limit = open_files_limit(pid) if pid is not None else None
    if limit is not None and limit < devices + MOSQUITTO_FD_HEADROOM:
        raise BenchError(
            f"Mosquitto may open {limit:,} files, {devices:,} devices need about "
            f"{devices + MOSQUITTO_FD_HEADROOM:,}: the launcher raises it up to the hard limit "
            "(and past it with CAP_SYS_RESOURCE); raise `ulimit -Hn` or use fewer --devices"
        )
    return limit


def per_connection_kib(
    samples: list[dict[str, Any]], role: str, baseline: dict[str, Any], full: dict[str, Any]
) -> float | None:
    """RSS growth of ``role`` per connection between two samples, in KiB."""
    added = full["connected"] - baseline["connected"]
    if added <= 0:
        return None
    grown = full[f"{role}_rss_mb"] - baseline[f"{role}_rss_mb"]
    return round(grown * 1024 / added, 1)


def memory_per_connection(samples: list[dict[str, Any]], devices: int) -> dict[str, Any]:
    """Mosquitto: from before the fleet to all connected; the simulator: from its first sample
    with workers to all connected (its processes' own start-up is not per connection)."""
    full = next((s for s in samples if s["connected"] >= devices), None)
    if full is None or not samples:
        return {}
    with_workers = next(
        (s for s in samples if s["simulator_rss_mb"] > samples[0]["simulator_rss_mb"] * 1.5),
        samples[0],
    )
    return {
        "at_sample_t_s": full["t_s"],
        "mosquitto_kib": per_connection_kib(samples, "mosquitto", samples[0], full),
        "simulator_kib": per_connection_kib(samples, "simulator", with_workers, full),
        "simulator_from_connected": with_workers["connected"],
    }


def _rate(n: int, first: float | None, last: float | None) -> float | None:
    if first is None or last is None or last <= first:
        return None
    return round(n / (last - first), 1)


def run(opts: FleetOptions) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    machine = machine_info()
    spec = FleetSpec(
        devices=opts.devices,
        device_prefix=f"fleet{tag}",
        rate=opts.rate,
        duration_s=opts.duration_s,
        payload_bytes=opts.payload_bytes,
        seed=19,
    )
    device_ids = [spec.device_id(i) for i in range(spec.devices)]
    with fleet_servers(
        workdir / "stack", opts.partitions, device_ids, anonymous=opts.insecure_anonymous
    ) as found:
        servers = found.servers
        mosquitto_pid = servers.mosquitto_pid()
        kafka_pid = servers.kafka_pid()
        fd_limit = _check_open_files(mosquitto_pid, opts.devices)
        topics = run_topics(tag)
        create_topics(servers, topics, opts.partitions)
        _wait_for_topics(servers.bootstrap, [topics[k] for k in TOPICS_READ])
        settings = bridge_settings(servers, tag, topics, list(found.bridge_login.items()))
        bridge, _ = start_command_path("off", settings, workdir)
        try:
            progress = _Progress(opts.devices)
            roles = {
                "mosquitto": lambda: [mosquitto_pid] if mosquitto_pid else [],
                "bridge": lambda: [bridge.popen.pid],
                "kafka": lambda: [kafka_pid] if kafka_pid else [],
                "simulator": simulator_pids,
            }
            sampler = Sampler(roles, lambda: progress.latest, opts.sample_s)
            sampler.sample()  # the baseline: servers and bridge up, no device yet
            endpoints = Endpoints(
                mqtt_host=servers.mqtt_host,
                mqtt_port=servers.mqtt_port,
                kafka_bootstrap=servers.bootstrap,
                topic_telemetry=topics["topic_telemetry"],
                topic_dlq=topics["topic_dlq"],
                topic_events=topics["topic_events"],
                credentials=found.credentials or {},
            )
            run_options = RunOptions(
                processes=opts.processes,
                connect_rate=opts.connect_rate,
                session_expiry_s=SESSION_EXPIRY_S,
                drain_timeout_s=60.0,
            )
            say(
                f"fleet: {opts.devices:,} devices x {opts.rate}/s for {opts.duration_s:.0f} s, "
                f"{opts.processes} processes, connecting at {opts.connect_rate:.0f}/s"
            )
            progress.started = time.monotonic()
            sampler.start()
            _path, manifest = run_fleet(
                spec, endpoints, run_options, runs_dir=workdir / "runs", on_stats=progress
            )
            fleet_s = time.monotonic() - progress.started
            time.sleep(DRAIN_SAMPLE_S)
            sampler.stop()
            bridge.check()
            say("verifying ...")
            v0 = time.monotonic()
            report = verify(
                manifest,
                bootstrap=servers.bootstrap,
                topic_telemetry=topics["topic_telemetry"],
                topic_dlq=topics["topic_dlq"],
                topic_events=topics["topic_events"],
                wait_s=VERIFY_WAIT_S,
                timeline_s=opts.timeline_s,
                on_progress=None,
                workers=VERIFY_WORKERS,
            )
            verify_s = time.monotonic() - v0
        finally:
            bridge.stop(30)
    totals = manifest["totals"]
    report_doc = report.to_dict()
    timeline = report_doc.pop("latency_timeline")
    return {
        "benchmark": "fleet",
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
        "machine": machine,
        "loadavg_start": machine.get("loadavg_before"),
        "loadavg_end": loadavg(),
        "mosquitto_open_files_limit": fd_limit,
        # each device logs in with its own secret (None: --insecure-anonymous)
        "auth": "anonymous" if found.credentials is None else "per-device credentials",
        "provision_s": found.provision_s,
        "run_id": manifest["run_id"],
        "connect": {
            "devices": opts.devices,
            "peak_connected": progress.peak_connected,
            "all_connected_s": progress.all_connected_s,
            "first_connected_s": progress.first_connected_s,
            # from the first connection on (the worker processes' start-up before it excluded)
            "connects_per_s": _rate(
                opts.devices, progress.first_connected_s, progress.all_connected_s
            ),
            "connect_failures": totals.get("connect_failures"),
            "devices_failed": totals.get("devices_failed"),
        },
        "throughput": {
            "target_msgs_per_s": opts.target_msgs_per_s,
            "published_msgs_per_s": totals.get("msgs_per_s"),
            "into_kafka_msgs_per_s": report.throughput_received_per_s,
            "published": totals.get("published"),
            "simulator_cpu_s": totals.get("cpu_seconds"),
        },
        "fleet_s": round(fleet_s, 1),
        "verify_s": round(verify_s, 1),
        "memory_per_connection": memory_per_connection(sampler.samples, opts.devices),
        "samples": sampler.samples,
        "latency_timeline": timeline,
        "verdict": {
            "ok": report.ok,
            "failures": report.failures,
            **{
                k: report_doc[k]
                for k in ("sent", "received", "unique", "missing", "missing_acked", "duplicates",
                          "order_violations", "devices_seen", "devices_spanning_partitions")
            },
            "latency": report_doc["latency"],
            "bridge_latency": report_doc["bridge_latency"],
        },
    }  # fmt: skip
