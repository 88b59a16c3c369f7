"""``iot-sim run``: its options, the :class:`FleetSpec` they describe, the run and its summary.

Exit codes: 0 ok, 1 when no device could connect (or a runtime error), 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from device_sim.cli_options import (
    EnvOption,
    add_endpoint_args,
    env_value,
    from_args,
    probability,
)
from device_sim.credentials import load_credentials, require_all
from device_sim.errors import SimConfigError
from device_sim.fleet import run_fleet
from device_sim.malformed import MALFORMED_KINDS, parse_kinds
from device_sim.run_config import Endpoints, RunOptions
from device_sim.spec import FleetSpec

log = logging.getLogger(__name__)

DEFAULT_MAX_PAYLOAD = 65536  # the bridge's max_payload_bytes default
DEFAULT_DURATION_S = 10.0


# realistic traffic: events and the rate shape (device_sim.events, device_sim.rate_shape)
TRAFFIC_SHAPE_OPTIONS = (
    EnvOption(
        "--event-rate",
        "IOT_SIM_EVENT_RATE",
        0.0,
        float,
        "probability of a spontaneous event (door_open, door_closed, button_press) per "
        "telemetry message; > 0 also turns on alarm events for anomalies and restart events "
        "after churn (devices/{id}/events, QoS 1)",
    ),
    EnvOption(
        "--diurnal-period",
        "IOT_SIM_DIURNAL_PERIOD",
        0.0,
        float,
        "seconds in one compressed day of the diurnal rate curve (0: flat rate); the run "
        "starts at midnight",
    ),
    EnvOption("--diurnal-min", "IOT_SIM_DIURNAL_MIN", 0.2, float, "rate factor at midnight (> 0)"),
    EnvOption("--diurnal-max", "IOT_SIM_DIURNAL_MAX", 1.0, float, "rate factor at midday"),
    EnvOption(
        "--burst-every",
        "IOT_SIM_BURST_EVERY",
        0.0,
        float,
        "one burst in every window of this many seconds, at a seeded point (0: no bursts)",
    ),
    EnvOption(
        "--burst-factor", "IOT_SIM_BURST_FACTOR", 5.0, float, "rate multiplier during a burst"
    ),
    EnvOption(
        "--burst-duration",
        "IOT_SIM_BURST_DURATION",
        10.0,
        float,
        "seconds a burst lasts (<= --burst-every)",
    ),
)


def _probability_option(group: Any, flag: str, help_text: str) -> None:
    """A per-message (or per-device) probability, off by default."""
    group.add_argument(flag, type=probability, default=0.0, help=help_text)


def add_run_parser(sub: Any, env: Mapping[str, str]) -> None:
    """The ``run`` subcommand and its options (``sub``: the parser's subparsers)."""
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
    _probability_option(i, "--anomaly-rate", "probability a reading is anomalous (per message)")
    _probability_option(
        i, "--malformed-rate", "probability a malformed payload precedes a message (per message)"
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
    _probability_option(
        i, "--late-rate", "probability a message carries a late event time (per message)"
    )
    i.add_argument("--late-min-s", type=float, default=120.0, help="smallest lateness (s)")
    i.add_argument("--late-max-s", type=float, default=900.0, help="largest lateness (s)")
    _probability_option(
        i,
        "--out-of-order-rate",
        "probability a message's ts precedes the previous one (per message)",
    )
    _probability_option(i, "--skew-fraction", "fraction of devices with a skewed clock")
    i.add_argument("--skew-max-ms", type=int, default=120_000, help="largest clock skew (ms)")
    _probability_option(
        i, "--churn-rate", "probability a device drops and reconnects after a message"
    )
    i.add_argument("--churn-down-min-s", type=float, default=0.5, help="shortest outage (s)")
    i.add_argument("--churn-down-max-s", type=float, default=3.0, help="longest outage (s)")
    _probability_option(
        i, "--offline-fraction", "fraction of devices that go offline for good mid-run"
    )
    shape = run.add_argument_group("events and rate shape (each also settable as IOT_SIM_*)")
    for option in TRAFFIC_SHAPE_OPTIONS:
        option.add_to(shape, env)
    c = run.add_argument_group("commands")
    c.add_argument(
        "--reply-latency-ms",
        type=float,
        default=50.0,
        help="mean reply latency (ms; uniform 0.5x..1.5x)",
    )
    _probability_option(c, "--reply-fail-rate", "probability a reply has status error")
    _probability_option(c, "--silent-fraction", "fraction of devices that never answer commands")
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
    a = run.add_argument_group("authentication")
    a.add_argument(
        "--credentials",
        type=Path,
        default=env_value(env, "IOT_SIM_CREDENTIALS_FILE", None, Path),
        help="JSON file {device_id: secret}: every device logs in with its id and its own secret "
        "(as `iot-stack up --devices N` provisions them); a device missing from it is an error "
        "[env IOT_SIM_CREDENTIALS_FILE]",
    )
    add_endpoint_args(run, env)


def spec_from(args: argparse.Namespace, env: Mapping[str, str]) -> FleetSpec:
    """The fleet the options describe (options are named as FleetSpec's fields)."""
    oversize = args.oversize_bytes
    if oversize is None:
        oversize = env_value(env, "IOT_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD, int) + 1024
    duration = args.duration
    if duration is None and args.count is None:
        duration = DEFAULT_DURATION_S
    return from_args(
        FleetSpec,
        args,
        duration_s=duration,
        malformed_kinds=parse_kinds(args.malformed_kinds),
        oversize_bytes=oversize,
    )


def run_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the fleet, print its totals; 1 when not one device could connect."""
    from device_sim.progress import ProgressView

    spec = spec_from(args, env)
    if args.processes < 1:
        raise SimConfigError("--processes must be >= 1")
    if args.connect_rate <= 0:
        raise SimConfigError("--connect-rate must be > 0")
    options = from_args(
        RunOptions, args, record_offsets=not args.no_offsets, sync_start=not args.no_sync_start
    )
    endpoints = from_args(Endpoints, args, credentials=_credentials(args, spec))
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
    sys.stdout.write(_totals_json(doc, path) if args.json else _summary(doc, path, spec.devices))
    if totals.get("devices_failed", 0) == spec.devices:
        log.error("no device could run (is Mosquitto at %s:%s?)", args.mqtt_host, args.mqtt_port)
        sys.stderr.write(f"error: no device could connect to {args.mqtt_host}:{args.mqtt_port}\n")
        return 1
    return 0


def _credentials(args: argparse.Namespace, spec: FleetSpec) -> dict[str, str]:
    """The per-device secrets of ``--credentials`` (checked to cover the whole fleet), or {}."""
    if args.credentials is None:
        return {}
    if args.mqtt_username:
        raise SimConfigError("--credentials and --mqtt-username exclude each other")
    found = load_credentials(args.credentials)
    require_all(found, (spec.device_id(i) for i in range(spec.devices)), args.credentials)
    return found


def _totals_json(doc: Mapping[str, Any], path: Path) -> str:
    return (
        orjson.dumps({"run_id": doc["run_id"], "manifest": str(path), **doc["totals"]}).decode()
        + "\n"
    )


def _summary(doc: Mapping[str, Any], path: Path, devices: int) -> str:
    totals = doc["totals"]
    rate = totals.get("msgs_per_s")
    events = totals.get("events_sent", 0)
    return (
        f"run {doc['run_id']} {doc['status']}: {totals.get('telemetry_sent', 0):,} telemetry "
        f"+ {totals.get('malformed_sent', 0):,} malformed"
        f"{f' + {events:,} events' if events else ''} from {devices} devices, "
        f"{'-' if rate is None else f'{rate:,.0f}'} msg/s, "
        f"unacknowledged {totals.get('unacked', 0)}, errors {totals.get('publish_errors', 0)}, "
        f"devices failed {totals.get('devices_failed', 0)}, CPU {totals.get('cpu_seconds')} s\n"
        f"manifest {path}\nverify with: iot-sim verify {doc['run_id']}\n"
    )
