"""The asyncio fleet: one gmqtt connection per device, one event loop per process.

:func:`run_fleet` is the entry point: it records the Kafka end offsets (so the verifier knows
where the run starts), writes a ``running`` manifest, runs the devices (in this process or in
``processes`` worker processes, devices split round-robin), then writes the final manifest.

A device connects (client id = device id, clean start off, a Last Will of ``offline`` retained on
``devices/{id}/status``), publishes a retained ``online``, subscribes to its commands and its
groups' broadcasts (in ``on_connect``, so reconnects renew them), then follows its
:class:`~device_sim.device.DeviceScript`. QoS 1 acknowledgements are tracked per packet id, so
the manifest knows exactly which seqs Mosquitto acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
import os
import queue
import resource
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gmqtt import Client, Message, Subscription
from gmqtt.storage import PersistentStorage

from device_sim import manifest as manifest_io
from device_sim.commands import Reply, Responder, parse_command, subscriptions
from device_sim.device import DeviceScript, Outgoing, rng_for
from device_sim.errors import SimError
from device_sim.spec import FleetSpec

log = logging.getLogger(__name__)

UNLIMITED_RECONNECTS = -1
DISCONNECT_WITH_WILL = 0x04  # MQTT 5 reason code: "disconnect with Will Message"
STATS_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the fleet connects and where the verifier reads (env names as the bridge's)."""

    mqtt_host: str = "localhost"
    mqtt_port: int = 1883
    mqtt_username: str = ""
    mqtt_password: str = ""
    kafka_bootstrap: str = "localhost:9092"
    topic_telemetry: str = "iot.telemetry"
    topic_dlq: str = "iot.dlq"

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("mqtt_password")
        return out


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How the fleet runs (not what it sends)."""

    processes: int = 1
    connect_rate: float = 200.0  # new MQTT connections per second, whole fleet
    session_expiry_s: int = 600
    keepalive_s: int = 60
    drain_timeout_s: float = 15.0  # at the end: wait this long for QoS 1 acks
    connect_attempts: int = 5
    sync_start: bool = True  # start sending once every device of the process has connected
    record_offsets: bool = True  # read Kafka end offsets at start (for the verifier)


@dataclass
class Stats:
    """Counters of one worker (summed over workers for the progress view)."""

    connected: int = 0
    connects: int = 0
    published: int = 0
    telemetry: int = 0
    malformed: int = 0
    awaiting_ack: int = 0
    acked: int = 0
    errors: int = 0
    connect_failures: int = 0
    commands: int = 0
    replies: int = 0
    finished: int = 0
    first_publish: float | None = None  # epoch seconds
    last_publish: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return asdict(self)


def merge_snapshots(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for snap in snaps:
        for key, value in snap.items():
            if key == "first_publish":
                if value is not None:
                    out[key] = value if out.get(key) is None else min(out[key], value)
                else:
                    out.setdefault(key, None)
            elif key == "last_publish":
                if value is not None:
                    out[key] = value if out.get(key) is None else max(out[key], value)
                else:
                    out.setdefault(key, None)
            else:
                out[key] = out.get(key, 0) + value
    return out


class AckTracker(PersistentStorage):
    """gmqtt's in-flight store, also mapping packet ids to our tags to see which are acked."""

    def __init__(self, on_ack: Callable[[int], None]) -> None:
        super().__init__()
        self.tag: int | None = None  # set by the publisher around client.publish()
        self._tags: dict[int, int] = {}
        self._on_ack = on_ack

    def push_message(self, mid: int, raw_package: bytes) -> None:
        super().push_message(mid, raw_package)
        if self.tag is not None:
            self._tags[mid] = self.tag

    def remove_message_by_mid(self, mid: int) -> None:
        super().remove_message_by_mid(mid)
        tag = self._tags.pop(mid, None)
        if tag is not None:
            self._on_ack(tag)

    def clear(self) -> None:
        # the broker has no session: these will never be resent nor acked
        self._tags.clear()
        super().clear()

    @property
    def pending(self) -> int:
        return len(self._tags)


class StartGate:
    """Opens when every device of the process has connected (or given up)."""

    def __init__(self, devices: int) -> None:
        self._left = devices
        self.opened = asyncio.Event()
        if devices <= 0:
            self.opened.set()

    def arrive(self) -> None:
        self._left -= 1
        if self._left <= 0:
            self.opened.set()


class ConnectLimiter:
    """Spaces connection attempts ``1/rate`` seconds apart (per process)."""

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        slot = max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await asyncio.sleep(slot - now)


@dataclass
class DeviceRecord:
    """What one device did, for the manifest."""

    device: str
    groups: list[str]
    qos: int
    skew_ms: int
    silent: bool
    sent: int = 0
    unacked: list[int] = field(default_factory=list)
    connects: int = 0
    failed: str | None = None
    commands: int = 0
    replied_ok: int = 0
    replied_error: int = 0
    ignored: int = 0
    injections: dict[str, list[dict[str, Any]]] = field(
        default_factory=manifest_io.empty_injections
    )


class SimDevice:
    """The I/O side of one device: its MQTT client driven by its script."""

    def __init__(
        self,
        script: DeviceScript,
        *,
        endpoints: Endpoints,
        options: RunOptions,
        stats: Stats,
        limiter: ConnectLimiter,
        stop: asyncio.Event,
        gate: StartGate | None = None,
    ) -> None:
        self.script = script
        self.endpoints = endpoints
        self.options = options
        self.stats = stats
        self.limiter = limiter
        self.gate = gate
        self.stop = stop
        spec = script.spec
        self.id = script.device_id
        self.status_topic = f"devices/{self.id}/status"
        self.record = DeviceRecord(
            device=self.id,
            groups=list(script.groups),
            qos=spec.qos,
            skew_ms=script.skew_ms,
            silent=script.silent,
        )
        self.responder = Responder(
            self.id,
            rng_for(spec.seed, script.index, "commands"),
            spec.reply_latency_ms,
            spec.reply_fail_rate,
            script.silent,
        )
        self._unacked: set[int] = set()
        self._malformed_pending: dict[int, dict[str, Any]] = {}
        self._next_malformed_tag = -1
        self._tracker = AckTracker(self._on_ack)
        self._client: Client | None = None
        self._last_metrics: dict[str, float] = {}

    # --- MQTT plumbing -------------------------------------------------------------------------

    def _make_client(self) -> Client:
        will = Message(self.status_topic, b"offline", qos=1, retain=True)
        client = Client(
            self.id,
            clean_session=False,
            will_message=will,
            persistent_storage=self._tracker,
            session_expiry_interval=self.options.session_expiry_s,
            logger=logging.getLogger("gmqtt.client"),
        )
        client.set_config({"reconnect_retries": UNLIMITED_RECONNECTS, "reconnect_delay": 1})
        if self.endpoints.mqtt_username:
            client.set_auth_credentials(
                self.endpoints.mqtt_username, self.endpoints.mqtt_password or None
            )
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        return client

    def _on_connect(self, client: Client, flags: int, rc: int, properties: Any) -> None:
        self.stats.connected += 1
        self.stats.connects += 1
        self.record.connects += 1
        topics = subscriptions(self.id, self.script.groups)
        client.subscribe([Subscription(t, qos=1) for t in topics])

    def _on_disconnect(self, client: Client, packet: Any, exc: Any = None) -> None:
        self.stats.connected -= 1

    def _on_message(
        self, client: Client, topic: str, payload: bytes, qos: int, properties: Any
    ) -> int:
        command = parse_command(self.id, topic, payload, properties or {})
        if command is None:
            return 0
        self.stats.commands += 1
        self.record.commands += 1
        reply = self.responder.reply(command, self._last_metrics)
        if reply is None:
            self.record.ignored += 1
            return 0
        asyncio.get_running_loop().call_later(reply.delay_s, self._send_reply, reply)
        return 0

    def _send_reply(self, reply: Reply) -> None:
        client = self._client
        if client is None:
            return
        props: dict[str, Any] = {}
        if reply.correlation_data is not None:
            props["correlation_data"] = reply.correlation_data
        try:
            client.publish(reply.topic, reply.payload, qos=1, **props)
        except Exception:
            log.debug("reply from %s failed", self.id, exc_info=True)
            self.stats.errors += 1
            return
        self.stats.replies += 1
        if reply.ok:
            self.record.replied_ok += 1
        else:
            self.record.replied_error += 1

    def _on_ack(self, tag: int) -> None:
        if tag in self._unacked:
            self._unacked.discard(tag)
            self.stats.awaiting_ack -= 1
            self.stats.acked += 1

    async def _connect(self) -> bool:
        assert self._client is not None
        delay = 0.5
        for attempt in range(1, self.options.connect_attempts + 1):
            await self.limiter.acquire()
            try:
                await self._client.connect(
                    self.endpoints.mqtt_host,
                    self.endpoints.mqtt_port,
                    keepalive=self.options.keepalive_s,
                )
            except Exception as exc:  # noqa: BLE001 (gmqtt raises OSError, MQTTConnectError, ...)
                self.stats.connect_failures += 1
                log.debug("connect %s attempt %d failed: %s", self.id, attempt, exc)
                if attempt == self.options.connect_attempts or self.stop.is_set():
                    self.record.failed = f"connect failed: {exc}"
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._client.publish(self.status_topic, b"online", qos=1, retain=True)
            return True
        return False

    async def _wait_gate(self, gate: StartGate) -> None:
        while not gate.opened.is_set() and not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.opened.wait(), 1.0)

    async def _drain(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._tracker.wait_empty(), seconds)

    # --- publishing ----------------------------------------------------------------------------

    def _publish(self, out: Outgoing) -> None:
        assert self._client is not None
        if out.seq is not None:
            tag = out.seq
        else:
            tag = self._next_malformed_tag
            self._next_malformed_tag -= 1
        for kind, item in out.injections:
            self.record.injections[kind].append(item)
            if kind == "malformed":
                item["acked"] = out.qos == 1
                if out.qos == 1:
                    self._malformed_pending[tag] = item
        if out.qos == 1:
            self._unacked.add(tag)
            self.stats.awaiting_ack += 1
            self._tracker.tag = tag
        try:
            self._client.publish(out.topic, out.payload, qos=out.qos)
        except Exception as exc:  # noqa: BLE001 (e.g. OverflowError: in-flight window full)
            self.stats.errors += 1
            log.debug("publish %s failed: %s", self.id, exc)
        finally:
            self._tracker.tag = None
        if out.seq is not None:
            self.record.sent = out.seq
            self.stats.telemetry += 1
        else:
            self.stats.malformed += 1
        self.stats.published += 1
        now = time.time()
        if self.stats.first_publish is None:
            self.stats.first_publish = now
        self.stats.last_publish = now

    async def _pause(self, seconds: float) -> None:
        """Sleep, in slices, so a stop request is seen within a second."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while not self.stop.is_set():
            left = end - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 1.0))

    async def run(self) -> DeviceRecord:
        try:
            await self._run()
        except Exception as exc:  # noqa: BLE001 (one device's failure must not end the fleet)
            log.warning("device %s failed: %s", self.id, exc)
            self.record.failed = f"{type(exc).__name__}: {exc}"
            self.stats.errors += 1
        finally:
            self.stats.finished += 1
        self.record.unacked = sorted(t for t in self._unacked if t > 0)
        for tag in self._unacked:
            if tag < 0 and tag in self._malformed_pending:
                self._malformed_pending[tag]["acked"] = False
        if self.script.skew_ms:
            self.record.injections["clock_skew"].append(
                {"device": self.id, "skew_ms": self.script.skew_ms}
            )
        return self.record

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._client = self._make_client()
        connected = await self._connect()
        if self.gate is not None:
            self.gate.arrive()
            if connected:
                await self._wait_gate(self.gate)
        if not connected:
            return
        script = self.script
        target = loop.time()
        gone = False
        while not self.stop.is_set():
            delay = script.next_delay()
            if script.done():
                break
            target += delay
            wait = target - loop.time()
            if wait > 0:
                await self._pause(wait)
                if self.stop.is_set():
                    break
            now_ms = int(time.time() * 1000)
            outs = script.next_messages(now_ms)
            for out in outs:
                self._publish(out)
            last = outs[-1]
            if last.after == "churn":
                await self._drain(self.options.drain_timeout_s)
                await self._client.disconnect(reason_code=DISCONNECT_WITH_WILL)
                await self._pause(last.down_s)
                if not await self._connect():
                    return
                target = loop.time()  # no burst after the outage: skip the missed slots
            elif last.after == "offline":
                await self._drain(self.options.drain_timeout_s)
                await self._client.disconnect(reason_code=DISCONNECT_WITH_WILL)
                gone = True
                break
        if not gone:
            await self._drain(self.options.drain_timeout_s)
            self._client.publish(self.status_topic, b"offline", qos=1, retain=True)
            await self._drain(min(2.0, self.options.drain_timeout_s))
            await self._client.disconnect()


# --- one worker (one event loop) --------------------------------------------------------------


async def run_devices(
    spec: FleetSpec,
    run_id: str,
    *,
    indices: list[int],
    endpoints: Endpoints,
    options: RunOptions,
    stats: Stats,
    stop: asyncio.Event,
    on_stats: Callable[[dict[str, Any]], None] | None = None,
) -> list[DeviceRecord]:
    """Run the devices ``indices`` on the current loop until their scripts end or ``stop``."""
    limiter = ConnectLimiter(options.connect_rate / max(1, options.processes))
    gate = StartGate(len(indices)) if options.sync_start else None
    devices = [
        SimDevice(
            DeviceScript(spec, i, run_id),
            endpoints=endpoints,
            options=options,
            stats=stats,
            limiter=limiter,
            stop=stop,
            gate=gate,
        )
        for i in indices
    ]
    tasks = [asyncio.create_task(d.run()) for d in devices]

    async def report() -> None:
        while True:
            if on_stats is not None:
                on_stats(stats.snapshot())
            await asyncio.sleep(STATS_INTERVAL_S)

    reporter = asyncio.create_task(report())
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        if on_stats is not None:
            on_stats(stats.snapshot())


def _quiet_gmqtt() -> None:
    for name in ("gmqtt", "gmqtt.client", "gmqtt.mqtt"):
        logging.getLogger(name).setLevel(logging.ERROR)


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted`` (capped by the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _install_stop(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        # not possible off the main thread (ValueError) or on some platforms
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def _worker_process(  # noqa: PLR0917 (a multiprocessing target takes positional args)
    worker: int,
    spec: FleetSpec,
    run_id: str,
    indices: list[int],
    endpoints: Endpoints,
    options: RunOptions,
    out: Any,  # multiprocessing Queue
    stop_flag: Any,  # multiprocessing Event
) -> None:
    """Entry point of one worker process: run its devices, stream stats, send the records."""
    _quiet_gmqtt()
    raise_fd_limit(len(indices) + 256)

    async def main() -> list[DeviceRecord]:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        _install_stop(loop, stop)

        async def watch() -> None:
            while not stop.is_set():
                if stop_flag.is_set():
                    stop.set()
                await asyncio.sleep(0.2)

        watcher = asyncio.create_task(watch())
        try:
            return await run_devices(
                spec,
                run_id,
                indices=indices,
                endpoints=endpoints,
                options=options,
                stats=Stats(),
                stop=stop,
                on_stats=lambda snap: out.put(("stats", worker, snap)),
            )
        finally:
            watcher.cancel()

    try:
        records = asyncio.run(main())
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out.put(("result", worker, [asdict(r) for r in records], usage.ru_utime + usage.ru_stime))
    except BaseException as exc:
        out.put(("error", worker, f"{type(exc).__name__}: {exc}", 0.0))
        raise


# --- the fleet ----------------------------------------------------------------------------------


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmddTHHMMSS-<6 hex>`` (UTC)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _record_offsets(endpoints: Endpoints) -> dict[str, dict[str, int]] | None:
    from device_sim.kafka_io import end_offsets

    try:
        offsets = end_offsets(
            endpoints.kafka_bootstrap,
            [endpoints.topic_telemetry, endpoints.topic_dlq],
            timeout=5.0,
        )
    except SimError as exc:
        log.warning(
            "could not record Kafka start offsets (%s); verify will scan from the start", exc
        )
        return None
    return {
        "telemetry": {str(p): o for p, o in offsets[endpoints.topic_telemetry].items()},
        "dlq": {str(p): o for p, o in offsets[endpoints.topic_dlq].items()},
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build_manifest(
    spec: FleetSpec,
    run_id: str,
    *,
    endpoints: Endpoints,
    options: RunOptions,
    started_at_ms: int,
    start_offsets: dict[str, dict[str, int]] | None,
    records: list[dict[str, Any]] | None = None,
    stats: dict[str, Any] | None = None,
    status: str = "running",
    ended_at_ms: int | None = None,
    cpu_seconds: float | None = None,
) -> dict[str, Any]:
    """The manifest document (see :mod:`device_sim.manifest`)."""
    injections = manifest_io.empty_injections()
    devices: dict[str, dict[str, Any]] = {}
    commands = {"received": 0, "replied_ok": 0, "replied_error": 0, "ignored": 0}
    for rec in sorted(records or [], key=lambda r: r["device"]):
        for kind, items in rec["injections"].items():
            injections[kind].extend(items)
        devices[rec["device"]] = {
            "groups": rec["groups"],
            "sent": rec["sent"],
            "qos": rec["qos"],
            "unacked": rec["unacked"],
            "skew_ms": rec["skew_ms"],
            "silent": rec["silent"],
            "connects": rec["connects"],
            "failed": rec["failed"],
        }
        commands["received"] += rec["commands"]
        commands["replied_ok"] += rec["replied_ok"]
        commands["replied_error"] += rec["replied_error"]
        commands["ignored"] += rec["ignored"]
    totals: dict[str, Any] = {}
    if stats is not None:
        first, last = stats.get("first_publish"), stats.get("last_publish")
        span = (last - first) if first is not None and last is not None else 0.0
        published = int(stats.get("published", 0))
        rate = published / span if span > 0 else None
        totals = {
            "published": published,
            "telemetry_sent": sum(d["sent"] for d in devices.values()),
            "malformed_sent": int(stats.get("malformed", 0)),
            "unacked": sum(len(d["unacked"]) for d in devices.values()),
            "publish_errors": int(stats.get("errors", 0)),
            "connect_failures": int(stats.get("connect_failures", 0)),
            "devices_failed": sum(1 for d in devices.values() if d["failed"]),
            "connects": int(stats.get("connects", 0)),
            "publish_span_s": round(span, 3),
            "msgs_per_s": round(rate, 1) if rate else None,
            "cpu_seconds": round(cpu_seconds, 3) if cpu_seconds is not None else None,
        }
        if rate and cpu_seconds is not None and span > 0:
            totals["cpu_cores_per_1000_msgs_per_s"] = round(cpu_seconds / span / (rate / 1000), 4)
    return {
        "format": manifest_io.FORMAT,
        "run_id": run_id,
        "status": status,
        "spec": spec.to_dict(),
        "endpoints": endpoints.public(),
        "processes": options.processes,
        "started_at_ms": started_at_ms,
        "ended_at_ms": ended_at_ms,
        "start_offsets": start_offsets,
        "devices": devices,
        "injections": injections,
        "expected_dlq": manifest_io.expected_dlq(injections["malformed"]),
        "commands": commands,
        "totals": totals,
    }


def run_fleet(
    spec: FleetSpec,
    endpoints: Endpoints,
    options: RunOptions,
    *,
    runs_dir: Path,
    run_id: str | None = None,
    on_stats: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run a whole simulation; returns the manifest path and document."""
    run_id = run_id or new_run_id()
    path = manifest_io.run_dir(runs_dir, run_id) / manifest_io.MANIFEST_NAME
    offsets = _record_offsets(endpoints) if options.record_offsets else None
    started = int(time.time() * 1000)
    manifest_io.write(
        path,
        build_manifest(
            spec,
            run_id,
            endpoints=endpoints,
            options=options,
            started_at_ms=started,
            start_offsets=offsets,
        ),
    )
    log.info("run %s: %d devices, manifest %s", run_id, spec.devices, path)
    cpu_before = _cpu_seconds()
    interrupted = False
    if options.processes <= 1:
        records, stats, cpu, interrupted = _run_inline(spec, run_id, endpoints, options, on_stats)
        cpu = _cpu_seconds() - cpu_before
    else:
        records, stats, cpu, interrupted = _run_processes(
            spec, run_id, endpoints, options, on_stats
        )
        cpu += _cpu_seconds() - cpu_before
    doc = build_manifest(
        spec,
        run_id,
        endpoints=endpoints,
        options=options,
        started_at_ms=started,
        start_offsets=offsets,
        records=records,
        stats=stats,
        status="interrupted" if interrupted else "complete",
        ended_at_ms=int(time.time() * 1000),
        cpu_seconds=cpu,
    )
    manifest_io.write(path, doc)
    return path, doc


def _run_inline(
    spec: FleetSpec,
    run_id: str,
    endpoints: Endpoints,
    options: RunOptions,
    on_stats: Callable[[dict[str, Any]], None] | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], float, bool]:
    _quiet_gmqtt()
    raise_fd_limit(spec.devices + 256)
    stats = Stats()
    interrupted = False

    async def main() -> list[DeviceRecord]:
        nonlocal interrupted
        stop = asyncio.Event()
        _install_stop(asyncio.get_running_loop(), stop)
        try:
            return await run_devices(
                spec,
                run_id,
                indices=list(range(spec.devices)),
                endpoints=endpoints,
                options=options,
                stats=stats,
                stop=stop,
                on_stats=on_stats,
            )
        finally:
            interrupted = stop.is_set()

    records = asyncio.run(main())
    return [asdict(r) for r in records], stats.snapshot(), 0.0, interrupted


def _run_processes(
    spec: FleetSpec,
    run_id: str,
    endpoints: Endpoints,
    options: RunOptions,
    on_stats: Callable[[dict[str, Any]], None] | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], float, bool]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop_flag = ctx.Event()
    n = min(options.processes, spec.devices)
    procs = []
    for w in range(n):
        indices = list(range(w, spec.devices, n))
        proc = ctx.Process(
            target=_worker_process,
            args=(w, spec, run_id, indices, endpoints, options, out, stop_flag),
            name=f"iot-sim-worker-{w}",
            daemon=True,
        )
        proc.start()
        procs.append(proc)
    latest: dict[int, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    cpu = 0.0
    done: set[int] = set()
    errors: list[str] = []
    interrupted = False

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        stop_flag.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while len(done) < n:
            try:
                msg = out.get(timeout=1.0)
            except queue.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in done]
                for i in dead:
                    # a worker that died without a result (killed): account it as failed
                    if out.empty():
                        errors.append(f"worker {i} exited with {procs[i].exitcode}")
                        done.add(i)
                continue
            kind, worker = msg[0], msg[1]
            if kind == "stats":
                latest[worker] = msg[2]
                if on_stats is not None:
                    on_stats(merge_snapshots(list(latest.values())))
            elif kind == "result":
                records.extend(msg[2])
                cpu += msg[3]
                done.add(worker)
            else:
                errors.append(f"worker {worker}: {msg[2]}")
                done.add(worker)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for p in procs:
            p.join(timeout=10)
    if errors:
        raise SimError("simulator workers failed: " + "; ".join(errors))
    return records, merge_snapshots(list(latest.values())), cpu, interrupted or stop_flag.is_set()


def worker_count_default() -> int:
    return max(1, (os.cpu_count() or 1))
