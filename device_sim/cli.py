"""``iot-sim``: run a simulated device fleet (``run``) and verify what reached Kafka (``verify``).

Endpoints and topics come from flags, else from the same ``IOT_*`` environment variables the
bridge reads (``IOT_MQTT_HOST``, ``IOT_MQTT_PORT``, ``IOT_KAFKA_BOOTSTRAP``,
``IOT_TOPIC_TELEMETRY``, ``IOT_TOPIC_DLQ``, ...), else from the defaults. Exit codes: 0 ok,
1 runtime error or a failed verification, 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson

from device_sim import manifest as manifest_io
from device_sim.errors import ManifestError, SimConfigError, SimError
from device_sim.fleet import run_fleet
from device_sim.malformed import MALFORMED_KINDS, parse_kinds
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_RUNS_DIR = "var/sim-runs"
DEFAULT_MAX_PAYLOAD = 65536  # the bridge's max_payload_bytes default


def _env(environ: Mapping[str, str], name: str, default: T, kind: Callable[[str], T]) -> T:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        raise SimConfigError(f"{name}={raw!r} is not a valid value") from exc


def _add_endpoint_args(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    g = parser.add_argument_group("endpoints (each also settable as an IOT_* variable)")
    g.add_argument(
        "--mqtt-host",
        default=_env(env, "IOT_MQTT_HOST", "localhost", str),
        help="Mosquitto host [env IOT_MQTT_HOST, default localhost]",
    )
    g.add_argument(
        "--mqtt-port",
        type=int,
        default=_env(env, "IOT_MQTT_PORT", 1883, int),
        help="Mosquitto port [env IOT_MQTT_PORT, default 1883]",
    )
    g.add_argument(
        "--mqtt-username",
        default=_env(env, "IOT_SIM_MQTT_USERNAME", "", str),
        help="MQTT user name for every device [env IOT_SIM_MQTT_USERNAME]",
    )
    g.add_argument(
        "--mqtt-password",
        default=_env(env, "IOT_SIM_MQTT_PASSWORD", "", str),
        help="MQTT password for every device [env IOT_SIM_MQTT_PASSWORD]",
    )
    g.add_argument(
        "--kafka-bootstrap",
        default=_env(env, "IOT_KAFKA_BOOTSTRAP", "localhost:9092", str),
        help="Kafka bootstrap servers [env IOT_KAFKA_BOOTSTRAP, default localhost:9092]",
    )
    g.add_argument(
        "--topic-telemetry",
        default=_env(env, "IOT_TOPIC_TELEMETRY", "iot.telemetry", str),
        help="Kafka telemetry topic [env IOT_TOPIC_TELEMETRY, default iot.telemetry]",
    )
    g.add_argument(
        "--topic-dlq",
        default=_env(env, "IOT_TOPIC_DLQ", "iot.dlq", str),
        help="Kafka dead-letter topic [env IOT_TOPIC_DLQ, default iot.dlq]",
    )
    g.add_argument(
        "--runs-dir",
        type=Path,
        default=Path(_env(env, "IOT_SIM_RUNS_DIR", DEFAULT_RUNS_DIR, str)),
        help=f"run manifests and reports [env IOT_SIM_RUNS_DIR, default {DEFAULT_RUNS_DIR}]",
    )
    g.add_argument(
        "--log-level",
        default=_env(env, "IOT_LOG_LEVEL", "WARNING", str).upper(),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level [env IOT_LOG_LEVEL, default WARNING]",
    )


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="iot-sim",
        description="Simulated IoT device fleet (MQTT) and end-to-end verifier (Kafka).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,verify}")

    run = sub.add_parser("run", help="run a fleet of simulated devices")
    t = run.add_argument_group("traffic")
    t.add_argument("--devices", type=int, default=10, help="number of devices (default 10)")
    t.add_argument(
        "--rate", type=float, default=1.0, help="messages per second per device (default 1)"
    )
    t.add_argument(
        "--poisson",
        action="store_true",
        help="Poisson arrivals (exponential gaps) instead of a fixed interval",
    )
    t.add_argument("--qos", type=int, choices=[0, 1], default=1, help="telemetry QoS (default 1)")
    length = t.add_mutually_exclusive_group()
    length.add_argument(
        "--duration", type=float, default=None, help="seconds to run (default 10 unless --count)"
    )
    length.add_argument(
        "--count",
        type=int,
        default=None,
        help="telemetry messages per device (instead of a duration)",
    )
    t.add_argument(
        "--payload-bytes",
        type=int,
        default=0,
        help="pad each telemetry payload to about this many bytes (default 0: natural ~150 B)",
    )
    t.add_argument("--seed", type=int, default=1, help="random seed: same seed, same payloads")
    t.add_argument(
        "--device-prefix", default="dev", help="device ids are <prefix>-<00000..> (default dev)"
    )
    t.add_argument("--groups", type=int, default=10, help="number of device groups (default 10)")
    t.add_argument(
        "--groups-per-device", type=int, default=1, help="groups each device joins (default 1)"
    )
    t.add_argument(
        "--day-seconds",
        type=float,
        default=86400.0,
        help="length of the temperature daily cycle in seconds (shorten it to see cycles)",
    )
    i = run.add_argument_group("injections (recorded in the manifest)")
    i.add_argument(
        "--anomaly-rate",
        type=_probability,
        default=0.0,
        help="probability a reading is anomalous (per message)",
    )
    i.add_argument(
        "--malformed-rate",
        type=_probability,
        default=0.0,
        help="probability a malformed payload precedes a message (per message)",
    )
    i.add_argument(
        "--malformed-kinds",
        default="all",
        help=f"comma-separated malformed kinds or 'all': {','.join(MALFORMED_KINDS)}",
    )
    i.add_argument(
        "--oversize-bytes",
        type=int,
        default=None,
        help="size of 'oversized' payloads (default IOT_MAX_PAYLOAD_BYTES + 1024)",
    )
    i.add_argument(
        "--late-rate",
        type=_probability,
        default=0.0,
        help="probability a message carries a late event time (per message)",
    )
    i.add_argument("--late-min-s", type=float, default=120.0, help="smallest lateness (s)")
    i.add_argument("--late-max-s", type=float, default=900.0, help="largest lateness (s)")
    i.add_argument(
        "--out-of-order-rate",
        type=_probability,
        default=0.0,
        help="probability a message's ts precedes the previous one (per message)",
    )
    i.add_argument(
        "--skew-fraction",
        type=_probability,
        default=0.0,
        help="fraction of devices with a skewed clock",
    )
    i.add_argument("--skew-max-ms", type=int, default=120_000, help="largest clock skew (ms)")
    i.add_argument(
        "--churn-rate",
        type=_probability,
        default=0.0,
        help="probability a device drops and reconnects after a message",
    )
    i.add_argument("--churn-down-min-s", type=float, default=0.5, help="shortest outage (s)")
    i.add_argument("--churn-down-max-s", type=float, default=3.0, help="longest outage (s)")
    i.add_argument(
        "--offline-fraction",
        type=_probability,
        default=0.0,
        help="fraction of devices that go offline for good mid-run",
    )
    c = run.add_argument_group("commands")
    c.add_argument(
        "--reply-latency-ms",
        type=float,
        default=50.0,
        help="mean reply latency (ms; uniform 0.5x..1.5x)",
    )
    c.add_argument(
        "--reply-fail-rate",
        type=_probability,
        default=0.0,
        help="probability a reply has status error",
    )
    c.add_argument(
        "--silent-fraction",
        type=_probability,
        default=0.0,
        help="fraction of devices that never answer commands",
    )
    r = run.add_argument_group("runner")
    r.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes, one asyncio loop each (default 1)",
    )
    r.add_argument(
        "--connect-rate",
        type=float,
        default=200.0,
        help="new MQTT connections per second, whole fleet (default 200)",
    )
    r.add_argument(
        "--session-expiry-s",
        type=int,
        default=600,
        help="MQTT 5 session expiry of each device (s, default 600)",
    )
    r.add_argument(
        "--drain-timeout-s",
        type=float,
        default=15.0,
        help="at the end, how long to wait for QoS 1 acks (s)",
    )
    r.add_argument(
        "--no-sync-start",
        action="store_true",
        help="let each device start sending as soon as it connects (default: a process's "
        "devices start together once all are connected, so the rate is steady)",
    )
    r.add_argument(
        "--no-offsets",
        action="store_true",
        help="do not read Kafka end offsets at start (verify then scans from the start)",
    )
    r.add_argument("--run-id", default=None, help="run id (default: timestamp + random)")
    r.add_argument("--no-progress", action="store_true", help="no live progress on stderr")
    r.add_argument("--json", action="store_true", help="print the run totals as JSON on stdout")
    _add_endpoint_args(run, env)

    ver = sub.add_parser("verify", help="verify a run against Kafka")
    ver.add_argument(
        "run",
        nargs="?",
        default=None,
        help="run id, run directory or manifest file (default: the most recent run)",
    )
    ver.add_argument(
        "--wait-s",
        type=float,
        default=15.0,
        help="keep reading up to this long while acknowledged messages are missing",
    )
    ver.add_argument(
        "--from-beginning",
        action="store_true",
        help="scan the topics from their start instead of the recorded offsets",
    )
    ver.add_argument(
        "--json",
        dest="json_out",
        default=None,
        metavar="PATH",
        help="also write the JSON report to PATH ('-' = stdout instead of the summary)",
    )
    _add_endpoint_args(ver, env)
    return parser


def _spec_from(args: argparse.Namespace, env: Mapping[str, str]) -> FleetSpec:
    oversize = args.oversize_bytes
    if oversize is None:
        oversize = _env(env, "IOT_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD, int) + 1024
    duration = args.duration
    if duration is None and args.count is None:
        duration = 10.0
    return FleetSpec(
        devices=args.devices,
        seed=args.seed,
        device_prefix=args.device_prefix,
        rate=args.rate,
        poisson=args.poisson,
        qos=args.qos,
        payload_bytes=args.payload_bytes,
        duration_s=duration,
        count=args.count,
        groups=args.groups,
        groups_per_device=args.groups_per_device,
        day_seconds=args.day_seconds,
        anomaly_rate=args.anomaly_rate,
        malformed_rate=args.malformed_rate,
        malformed_kinds=parse_kinds(args.malformed_kinds),
        oversize_bytes=oversize,
        late_rate=args.late_rate,
        late_min_s=args.late_min_s,
        late_max_s=args.late_max_s,
        out_of_order_rate=args.out_of_order_rate,
        skew_fraction=args.skew_fraction,
        skew_max_ms=args.skew_max_ms,
        churn_rate=args.churn_rate,
        churn_down_min_s=args.churn_down_min_s,
        churn_down_max_s=args.churn_down_max_s,
        offline_fraction=args.offline_fraction,
        reply_latency_ms=args.reply_latency_ms,
        reply_fail_rate=args.reply_fail_rate,
        silent_fraction=args.silent_fraction,
    )


def _endpoints_from(args: argparse.Namespace) -> Endpoints:
    return Endpoints(
        mqtt_host=args.mqtt_host,
        mqtt_port=args.mqtt_port,
        mqtt_username=args.mqtt_username,
        mqtt_password=args.mqtt_password,
        kafka_bootstrap=args.kafka_bootstrap,
        topic_telemetry=args.topic_telemetry,
        topic_dlq=args.topic_dlq,
    )


def _cmd_run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from device_sim.progress import ProgressView

    spec = _spec_from(args, env)
    if args.processes < 1:
        raise SimConfigError("--processes must be >= 1")
    if args.connect_rate <= 0:
        raise SimConfigError("--connect-rate must be > 0")
    options = RunOptions(
        processes=args.processes,
        connect_rate=args.connect_rate,
        session_expiry_s=args.session_expiry_s,
        drain_timeout_s=args.drain_timeout_s,
        record_offsets=not args.no_offsets,
        sync_start=not args.no_sync_start,
    )
    endpoints = _endpoints_from(args)
    with ProgressView(spec.devices, enabled=not args.no_progress) as view:
        path, doc = run_fleet(
            spec,
            endpoints,
            options,
            runs_dir=args.runs_dir,
            run_id=args.run_id,
            on_stats=view.update,
        )
    totals = doc["totals"]
    if args.json:
        sys.stdout.write(
            orjson.dumps({"run_id": doc["run_id"], "manifest": str(path), **totals}).decode() + "\n"
        )
    else:
        rate = totals.get("msgs_per_s")
        sys.stdout.write(
            f"run {doc['run_id']} {doc['status']}: {totals.get('telemetry_sent', 0):,} telemetry "
            f"+ {totals.get('malformed_sent', 0):,} malformed from {spec.devices} devices, "
            f"{'-' if rate is None else f'{rate:,.0f}'} msg/s, "
            f"unacknowledged {totals.get('unacked', 0)}, errors {totals.get('publish_errors', 0)}, "
            f"devices failed {totals.get('devices_failed', 0)}, CPU {totals.get('cpu_seconds')} s\n"
            f"manifest {path}\nverify with: iot-sim verify {doc['run_id']}\n"
        )
    if totals.get("devices_failed", 0) == spec.devices:
        log.error("no device could run (is Mosquitto at %s:%s?)", args.mqtt_host, args.mqtt_port)
        sys.stderr.write(f"error: no device could connect to {args.mqtt_host}:{args.mqtt_port}\n")
        return 1
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from device_sim.verifier import summary, verify

    path = manifest_io.resolve(args.runs_dir, args.run)
    doc = manifest_io.read(path)
    report = verify(
        doc,
        bootstrap=args.kafka_bootstrap,
        topic_telemetry=args.topic_telemetry,
        topic_dlq=args.topic_dlq,
        wait_s=args.wait_s,
        from_beginning=args.from_beginning,
    )
    payload = report.to_dict()
    payload["run_id"] = doc["run_id"]
    payload["manifest"] = str(path)
    encoded = orjson.dumps(payload, option=orjson.OPT_INDENT_2)
    (path.parent / manifest_io.REPORT_NAME).write_bytes(encoded)
    if args.json_out == "-":
        sys.stdout.write(encoded.decode() + "\n")
    else:
        sys.stdout.write(summary(report, doc) + "\n")
        if args.json_out:
            Path(args.json_out).write_bytes(encoded)
    return 0 if report.ok else 1


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def main(argv: list[str] | None = None) -> int:
    env: dict[str, Any] = dict(os.environ)
    try:
        parser = build_parser(env)
    except SimConfigError as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    _configure_logging(args.log_level)
    try:
        if args.command == "run":
            return _cmd_run(args, env)
        return _cmd_verify(args)
    except SimConfigError as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 2
    except (ManifestError, SimError) as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
